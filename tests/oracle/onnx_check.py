#!/usr/bin/env python3
"""onnx_check.py: the ONNX project's own checks on a model vidtrain exported (the outside
truth of tests/test_onnx.c): onnx.checker.check_model(full_check=True), which includes
strict shape inference, and the inferred shape of every graph output equal to the one
declared. Prints one JSON line (opset, ir_version, inputs, outputs, metadata); exit 0 when
the model passes, 1 when it does not, 3 when the onnx package is missing (the test then
skips). It only reads MODEL.
    /usr/bin/python3 tests/oracle/onnx_check.py MODEL
"""
import json
import sys

try:
    import onnx
    from onnx import shape_inference
except ImportError as e:
    print(f"onnx_check.py: python3-onnx is not installed ({e}); scripts/setup.sh installs it",
          file=sys.stderr)
    sys.exit(3)


def dims(vi):
    return [d.dim_param if d.dim_param else d.dim_value
            for d in vi.type.tensor_type.shape.dim]


def main():
    model = onnx.load(sys.argv[1])
    onnx.checker.check_model(model, full_check=True)
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    known = {vi.name: dims(vi) for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    declared = {o.name: dims(o) for o in model.graph.output}
    bad = {n: (d, known.get(n)) for n, d in declared.items() if known.get(n) != d}
    if bad:
        print(f"onnx_check.py: inferred output shapes differ from the declared: {bad}",
              file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"onnx": onnx.__version__, "ir_version": model.ir_version,
                      "opset": [o.version for o in model.opset_import],
                      "producer": f"{model.producer_name} {model.producer_version}",
                      "inputs": {i.name: dims(i) for i in model.graph.input},
                      "outputs": declared,
                      "metadata": {p.key: p.value for p in model.metadata_props}}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # checker and inference errors: the model fails
        print(f"onnx_check.py: {sys.argv[1]}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
