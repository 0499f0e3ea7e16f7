#!/usr/bin/env bash
# make_seeds.sh OUT [TARGET...]: the seed corpora of the fuzz targets (tests/fuzz/), one
# folder OUT/TARGET per target: safetensors, labels, lists, kinetics, hmdb, options,
# devspec, video, pth.
# Everything is generated here (nothing binary is checked in): text seeds with printf,
# safetensors files byte by byte (8-byte little-endian header length, JSON header,
# tensor data), small real videos of several codecs and containers with the ffmpeg
# command, and PyTorch checkpoints with python3 (torch.save when Debian's torch is there,
# hand-made pickles in zip archives always). It only ever writes under OUT, and (re)makes
# a target's folder only when it is missing, through a temporary folder and a rename, so
# a fuzz run and a ctest replay can share OUT.
set -euo pipefail
out=${1:?usage: make_seeds.sh OUT [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors labels lists kinetics hmdb options devspec video pth)
mkdir -p "$out"

# seed NAME: stdin into the folder being made.
seed() { cat > "$tmp/$1"; }

# 8-byte little-endian length, then the header, then the data (printf escapes).
le64() {
    local n=$1 i
    for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (n >> (8 * i)) & 255 )))"; done
}
st() { # st NAME JSON DATA-ESCAPES
    { le64 ${#2}; printf '%s' "$2"; printf "$3"; } > "$tmp/$1"
}

make_safetensors() {
    st empty.safetensors '{}' ''
    st one.safetensors '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' \
        '\x00\x00\x80\x3f\x00\x00\x00\x40'
    st padded.safetensors '{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}      ' \
        '\x00\x00\x80\x3f'
    local heads='[{\"name\":\"class\",\"classes\":3,\"loss\":\"softmax\",\"weight\":1,\"smoothing\":0.1},{\"name\":\"tags\",\"classes\":2,\"loss\":\"bce\",\"weight\":0.5,\"smoothing\":0}]'
    local optim='{\"kind\":\"sgd\",\"momentum\":0.9,\"dampening\":0,\"nesterov\":1,\"wd\":0.0001,\"alpha\":0.99,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"clip_norm\":0,\"step\":12}'
    local meta="\"__metadata__\":{\"vidtrain_version\":\"0.1.0\",\"model\":\"tiny\",\"clip\":\"4x16x16\",\"heads\":\"$heads\",\"dropout\":\"0.5\",\"optimizer\":\"$optim\",\"classes\":\"[\\\"a\\\",\\\"b\\\",\\\"c\\\"]\",\"epoch\":\"2\",\"step\":\"12\",\"rng\":\"18446744073709551615\"}"
    st vidtrain.safetensors "{$meta,\"conv1.weight\":{\"dtype\":\"F32\",\"shape\":[2,1,1,1,1],\"data_offsets\":[0,8]},\"bn1.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]},\"optim.sgd.momentum_buffer\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}" \
        '\x00\x00\x80\x3f\x00\x00\x00\xc0\x0c\x00\x00\x00\x00\x00\x00\x00\xcd\xcc\xcc\x3d\x00\x00\x00\x00'
    # The metadata of a real `vidtrain train` run (tiny, clip 4x32, 2 classes), with two
    # small tensors: what `eval` and `train --resume` read first (vidtrain_config, heads,
    # vidtrain_state).
    local run
    run=$(cat <<'JSON'
{"__metadata__":{"vidtrain_version":"0.1.0","model":"tiny","clip":"4x32x32","heads":"[{\"name\":\"class\",\"classes\":2,\"loss\":\"softmax\",\"weight\":1,\"smoothing\":0}]","dropout":"0","optimizer":"{\"kind\":\"sgd\",\"momentum\":0.899999976158142,\"dampening\":0,\"nesterov\":1,\"wd\":9.99999974737875e-05,\"alpha\":0,\"beta1\":0,\"beta2\":0,\"eps\":0,\"clip_norm\":0,\"step\":6}","epoch":"3","step":"6","cursor":"0","seed":"0","classes":"[\"move_left\",\"move_right\"]","vidtrain_config":"{\"data\":\"data\",\"out\":\"run\",\"model\":\"tiny\",\"clip_t\":4,\"crop\":32,\"stride\":1,\"short_side\":37,\"jitter_min\":37,\"jitter_max\":46,\"flip\":true,\"epochs\":3,\"batch\":4,\"optim\":\"sgd\",\"lr\":0.012500000186264515,\"momentum\":0.899999976158142,\"nesterov\":true,\"wd\":9.99999974737875e-05,\"clip_norm\":0,\"sched\":\"cosine\",\"warmup_epochs\":0.600000023841858,\"time_budget\":0,\"step_epochs\":10,\"gamma\":0.10000000149011612,\"smoothing\":0,\"dropout\":0,\"workers\":2,\"queue\":2,\"devices\":\"cpu\",\"gpus\":\"\",\"mem\":\"\",\"gpu_mem\":\"\",\"backend\":\"\",\"emulate\":\"\",\"speeds\":\"\",\"threads\":0,\"tower_split\":\"memory\",\"sync_bn\":false,\"precision\":\"fp32\",\"seed\":\"0\",\"val_split\":0.10000000149011612,\"val_dir\":\"\",\"lists\":\"\",\"fold\":1,\"eval_every\":1,\"val_clips\":3,\"val_crops\":1,\"labels\":\"\",\"loss_weights\":[],\"clips_per_video\":1,\"log_every\":50,\"checkpoint_every\":1,\"max_steps\":0,\"heads\":[{\"name\":\"class\",\"loss\":\"softmax\",\"weight\":1,\"smoothing\":0,\"classes\":[\"move_left\",\"move_right\"]}]}","normalisation":"{\"mean\":[0.43215999,0.394665986,0.376450002],\"std\":[0.228029996,0.221450001,0.216988996]}","vidtrain_state":"{\"epoch\":3,\"cursor\":0,\"step\":6,\"best\":0.5,\"best_loss\":0.69225290950920126,\"best_epoch\":3,\"loss\":0,\"clips\":0,\"seconds\":0,\"wait_s\":0,\"correct\":[0,0,0,0,0,0,0,0],\"head_loss\":[0,0,0,0,0,0,0,0]}"},"fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"bn1.num_batches_tracked":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}
JSON
)
    st run.safetensors "$run" '\x00\x00\x80\x3f\x00\x00\x80\xbf\x06\x00\x00\x00\x00\x00\x00\x00'
    local optim2='{\"kind\":\"adamw\",\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"wd\":0.05,\"step\":3}'
    st adamw.safetensors "{\"__metadata__\":{\"model\":\"r3d18\",\"clip\":\"16x112x112\",\"heads\":\"[{\\\"name\\\":\\\"class\\\",\\\"classes\\\":101,\\\"loss\\\":\\\"softmax\\\"}]\",\"optimizer\":\"$optim2\"},\"optim.adamw.exp_avg\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"optim.adamw.exp_avg_sq\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}" \
        '\x00\x00\x00\x00\x00\x00\x00\x00'
}

make_labels() {
    local a=ApplyEyeMakeup/v_ApplyEyeMakeup b=Basketball/v_Basketball
    printf 'path,class\n%s_g01_c01.avi,makeup\n%s_g01_c01.avi,ball\n%s_g02_c01.avi,ball\n' \
        "$a" "$b" "$b" | seed single.csv
    printf 'path,action,tags\n%s_g01_c01.avi,makeup,face;hands\n%s_g01_c02.avi,makeup,face\n%s_g01_c01.avi,ball,outdoor;people\nloose.mp4,ball,\n' \
        "$a" "$a" "$b" | seed multihead.csv
    printf '"path","class"\r\n"./%s_g02_c01.avi","b,c"\r\n\r\n"%s_g03_c01.mp4","say ""hi"""\r\n' \
        "$b" "$b" | seed quoted.csv
    printf 'path,class\n%s_g01_c01.avi,x\n%s_g01_c01.avi,y\nmissing/file.mp4,z\nBasketball/notes.txt,w\n%s_g02_c01.avi\n,empty\n%s_g01_c02.avi,\n' \
        "$a" "$a" "$b" "$a" | seed badlines.csv
    printf 'path,h1,h2,h3,h4,h5,h6,h7,h8,h9\n' | seed toomany.csv
    printf 'path,only;tags\n%s_g01_c01.avi,;\n%s_g01_c01.avi, a ; b ;;\n' "$a" "$b" | seed tags.csv
    printf 'path,start,class,end\nloose.mp4,1,x,3\nloose.mp4,0.5,y,2.25\nloose.mp4,1,x,3\nloose.mp4,4,z,\nloose.mp4,,w,\n%s_g01_c01.avi,5,x,2\n' \
        "$a" | seed segments.csv
    printf 'path,class,start\nloose.mp4,x,1\n' | seed halfsegment.csv
}

make_kinetics() {
    printf 'label,youtube_id,time_start,time_end,split\nabseiling,loose,0,10,train\n"air drumming",loose,12.5,20,val\nabseiling,v_Basketball_g01_c01,0,0,train\nx,missing,1,2,test\n,loose,3,4,test\n' \
        | seed untrimmed.csv
    printf 'youtube_id,time_start,time_end\nloose,1,2\nloose,1,2\nloose,2,1\nloose,a,b\n' | seed nolabel.csv
    printf 'label,time_start\nx,1\n' | seed badheader.csv
    printf 'label,youtube_id,time_start,time_end,split\r\n"a ""q""",loose,1e3,1e9,validate\r\n' \
        | seed quoted.csv
}

make_hmdb() {
    printf 'v_ApplyEyeMakeup_g01_c01.avi 1 \nv_ApplyEyeMakeup_g01_c02.avi 2 \nmissing.avi 0\n\0v_Basketball_g01_c01.avi 2\nv_Basketball_g01_c01.avi 1\nbad line here\nv_Basketball_g03_c01.mp4 7\n' \
        | seed split1.txt
    printf '\0' | seed empty.txt
    printf 'v_ApplyEyeMakeup_g01_c01.avi 1\r\n' | seed onlyone.txt
}

make_lists() {
    local a=ApplyEyeMakeup/v_ApplyEyeMakeup b=Basketball/v_Basketball
    printf '1 ApplyEyeMakeup\n2 Basketball\n\0%s_g01_c01.avi 1\n%s_g01_c01.avi 2\n%s_g01_c02.avi 1\n\0%s_g02_c01.avi\n%s_g03_c01.mp4\n' \
        "$a" "$b" "$a" "$a" "$b" | seed ucf.txt
    printf '1 ApplyEyeMakeup\r\n2 Basketball\r\n\0%s_g01_c01.avi 2\r\nWalking/v_Walking_g01_c01.avi 3\r\n%s_g09_c01.avi 2\r\n\0\r\n' \
        "$a" "$b" | seed crlf.txt
    printf '1 ApplyEyeMakeup\n3 Basketball\n\0\0' | seed badclassind.txt
    printf '1 ApplyEyeMakeup\n\0%s_g01_c01.avi\n' "$a" | seed notestlist.txt
    printf '\n\n\0\0' | seed noclasses.txt
}

make_options() {
    local v i=0
    for v in 16x112 16x112x112 8x64x64 0 -1 42 1e3 0.5 1.5h 300s 5m 10min 2G 512MiB \
             1.5TB 100k manual:3,1 manual:1,0,2.5 auto memory equal speed 0x1f 1,0.5,2 \
             18446744073709551615 " 5" nan inf 1e400 -0 4096x4096; do
        printf '%s' "$v" > "$tmp/opt$i"
        i=$((i + 1))
    done
}

make_devspec() {
    # devices, gpus, mem, gpu-mem, speeds, emulate-slowdown, backend, threads
    printf 'cpu:2\0\0cpu0=2G,cpu1=1G\0\0\0\0\0' | seed cpu2mem
    printf 'cpu,cpu-ref:2\0\0002G\0\0cpu0=30,cpu1=10\0001:2\0\0002' | seed mixed
    printf '\0001\0\0001:5G\0\0\0\0' | seed gpus
    printf 'cuda:0,cuda:0\0\0\0000:12G,0:6G\0\0\0\0' | seed cudatwice
    printf 'cpu:3\0\0\0\00030,20,10\0000:1.5,2:3\0cpu-ref\0004' | seed speeds
    printf '\0000,1\0\0\0\0\0\0' | seed gpulist
    printf 'cpu:64\0\0512M\0\0\0\0\0' | seed many
}

make_video() {
    command -v ffmpeg >/dev/null || { echo "make_seeds.sh: no ffmpeg command: video seeds skipped" >&2; return 0; }
    local enc
    enc=$(ffmpeg -hide_banner -encoders 2>/dev/null || true)
    have() { grep -q " $1 " <<< "$enc"; }
    ff() { ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=32x24:rate=25:duration=${DUR:-0.32}" "$@"; }
    ff -c:v mpeg4 -g 4 "$tmp/mpeg4.avi"
    ff -c:v mjpeg -pix_fmt yuvj420p "$tmp/mjpeg.mkv"
    ff -c:v mpeg1video -g 4 -f mpeg "$tmp/mpeg1.mpg"
    ff -c:v ffv1 "$tmp/ffv1.mkv"
    ff -c:v flv1 "$tmp/flv1.flv"
    ff -c:v mpeg2video -g 4 -f mpegts "$tmp/mpeg2.ts"
    ff -c:v gif "$tmp/anim.gif"
    DUR=0.16 ff -pix_fmt yuv420p -f yuv4mpegpipe "$tmp/raw.y4m"
    if have libx264; then
        ff -c:v libx264 -preset veryfast -pix_fmt yuv420p -g 4 -bf 1 -threads 1 "$tmp/h264.mp4"
        ff -c:v libx264 -preset veryfast -pix_fmt yuv420p -g 4 -threads 1 -metadata:s:v rotate=90 "$tmp/rot90.mov"
        ff -vf "settb=1/1000,setpts=(N*60-20*mod(N\,2))/(1000*TB)" -fps_mode passthrough \
           -c:v libx264 -preset veryfast -pix_fmt yuv420p -g 4 -threads 1 "$tmp/vfr.mkv"
    fi
    have libvpx && ff -c:v libvpx -b:v 100k -g 4 -deadline realtime "$tmp/vp8.webm"
    have libvpx-vp9 && ff -c:v libvpx-vp9 -b:v 0 -crf 40 -g 4 -deadline realtime -cpu-used 8 -threads 1 "$tmp/vp9.webm"
    have libtheora && ff -c:v libtheora -g 4 "$tmp/theora.ogv"
    return 0
}

# Small state_dicts (each under 4 KB: libFuzzer's -max_len follows the seeds): torch.save
# in both formats and pickle protocols 2 and 4 when /usr/bin/python3 has torch, and
# hand-made one-tensor pickles in zip archives (python3's zipfile) in any case.
make_pth() {
    local py=/usr/bin/python3
    [ -x "$py" ] || py=$(command -v python3 || true)
    [ -n "$py" ] || { echo "make_seeds.sh: no python3: pth seeds skipped" >&2; return 0; }
    "$py" - "$tmp" <<'PY'
import io, os, struct, sys, zipfile
out = sys.argv[1]
def zip_of(name, pkl, entries):
    with zipfile.ZipFile(os.path.join(out, name), "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        for k, v in entries.items():
            z.writestr("archive/" + k, v)
def tensor_pkl(storage=b"FloatStorage", numel=b"K\x04", size=b"K\x04\x85", stride=b"K\x01\x85"):
    return (b"\x80\x02}q\x00X\x01\x00\x00\x00wq\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02"
            b"((X\x07\x00\x00\x00storageq\x03ctorch\n" + storage + b"\nq\x04X\x01\x00\x00\x00"
            b"0q\x05X\x03\x00\x00\x00cpuq\x06" + numel + b"tq\x07QK\x00" + size + stride +
            b"\x89ccollections\nOrderedDict\n)Rq\x08tq\tRq\ns.")
four = struct.pack("<4f", 1, 2, 3, 4)
zip_of("hand.pth", tensor_pkl(), {"data/0": four})
zip_of("hand_half.pth", tensor_pkl(b"HalfStorage", size=b"K\x02K\x02\x86", stride=b"K\x01K\x02\x86"),
       {"data/0": four * 2})
zip_of("hand_long.pth", tensor_pkl(b"LongStorage", numel=b"K\x01", size=b")", stride=b")"),
       {"data/0": struct.pack("<q", 7)})
zip_of("hand_evil.pth", b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R.", {})
try:
    import torch
except ImportError:
    sys.exit(0)
torch.manual_seed(0)
sd = {"conv.weight": torch.randn(2, 1, 1, 2, 2), "bn.running_var": torch.rand(2),
      "bn.num_batches_tracked": torch.tensor(3), "h": torch.randn(2, 3).half().t(),
      "bf": torch.randn(3).bfloat16(), "d": torch.randn(2).double()}
a = torch.randn(6)
P = lambda n: os.path.join(out, n)
torch.save(sd, P("sd.pth"))
torch.save(sd, P("sd_legacy.pth"), _use_new_zipfile_serialization=False)
torch.save(sd, P("sd_proto4.pth"), pickle_protocol=4)
torch.save({"epoch": 1, "state_dict": {"module.a": a, "module.b": a[1:4]}, "lr": [0.1, None]},
           P("nested.pth"))
torch.save({"a": a, "b": a.view(2, 3).t()}, P("shared_legacy.pth"),
           _use_new_zipfile_serialization=False)
PY
}

for t in "${targets[@]}"; do
    [ -d "$out/$t" ] && continue
    tmp=$(mktemp -d "$out/.$t.XXXXXX")
    case $t in
        safetensors) make_safetensors ;;
        labels) make_labels ;;
        lists) make_lists ;;
        kinetics) make_kinetics ;;
        hmdb) make_hmdb ;;
        options) make_options ;;
        devspec) make_devspec ;;
        video) make_video ;;
        pth) make_pth ;;
        *) echo "make_seeds.sh: unknown target '$t'" >&2; rm -rf "$tmp"; exit 2 ;;
    esac
    mv "$tmp" "$out/$t" 2>/dev/null || rm -rf "$tmp" # another run made it meanwhile
done
