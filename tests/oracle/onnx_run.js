#!/usr/bin/env node
// onnx_run.js: runs an ONNX model in ONNX Runtime (npm's onnxruntime-node, installed by
// scripts/setup.sh into tools/onnxrt/) on one input tensor — the outside truth that
// tests/test_onnx.c compares vidtrain's exported models against.
//   node tests/oracle/onnx_run.js MODEL INPUT SHAPE OUTDIR
// INPUT: raw little-endian float32 of SHAPE ("2,3,8,32,32"), fed as the model's only
// input; each output is written to OUTDIR/NAME.bin (raw float32) and one JSON line on
// stdout says the ORT version and every output's dims. Exit 3 when onnxruntime-node is
// not installed (the test then skips), 1 on any other failure. It never changes MODEL.
'use strict';
const fs = require('fs');
const path = require('path');

const moddir = process.env.VT_ONNXRT || path.join(__dirname, '..', '..', 'tools', 'onnxrt');
let ort;
try {
  ort = require(path.join(moddir, 'node_modules', 'onnxruntime-node'));
} catch (e) {
  console.error(`onnx_run.js: onnxruntime-node not found under ${moddir} ` +
                `(bash scripts/setup.sh --no-demo installs it): ${e.message}`);
  process.exit(3);
}
const version = JSON.parse(fs.readFileSync(
  path.join(moddir, 'node_modules', 'onnxruntime-node', 'package.json'), 'utf8')).version;

async function main() {
  const [model, input, shapeArg, outdir] = process.argv.slice(2);
  if (!outdir) {
    console.error('usage: node tests/oracle/onnx_run.js MODEL INPUT SHAPE OUTDIR');
    process.exit(2);
  }
  const shape = shapeArg.split(',').map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const buf = fs.readFileSync(input);
  if (buf.length !== 4 * count)
    throw new Error(`${input}: ${buf.length} bytes, shape ${shapeArg} needs ${4 * count}`);
  const x = new Float32Array(count);
  for (let i = 0; i < count; i++)
    x[i] = buf.readFloatLE(4 * i);
  // One thread: tests share the machine's cores; the result does not depend on it.
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu'] });
  const feeds = {};
  feeds[session.inputNames[0]] = new ort.Tensor('float32', x, shape);
  const res = await session.run(feeds);
  const outs = {};
  for (const name of session.outputNames) {
    const t = res[name];
    const o = Buffer.alloc(4 * t.data.length);
    for (let i = 0; i < t.data.length; i++)
      o.writeFloatLE(t.data[i], 4 * i);
    fs.writeFileSync(path.join(outdir, `${name}.bin`), o);
    outs[name] = t.dims;
  }
  console.log(JSON.stringify({ ort: version, outputs: outs }));
}

main().catch((e) => {
  console.error(`onnx_run.js: ${e.message}`);
  process.exit(1);
});
