"""A model loaded by the ONNX Runtime installed in one folder, run on feeds read from standard input.

    python -I app_runtime_worker.py RUNTIME_FOLDER MODEL THREADS

Started by export/checks/app_runtimes.py, never by a user. Runs isolated (-I) with the folder first on its path, so the
`onnxruntime` it imports is that version's and nothing of pocketbert is imported. THREADS: the session's intra-op
threads (0: the runtime chooses). The first reply is the version, the model's input names and those threads; then
each request (a pickled dict of numpy arrays, length-prefixed) is answered with the session's outputs, or the
exception that stopped it.
"""

import pickle
import struct
import sys


def send(value) -> None:
    payload = pickle.dumps(value)
    sys.stdout.buffer.write(struct.pack("<Q", len(payload)) + payload)
    sys.stdout.buffer.flush()


def main() -> None:
    folder, model, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, folder)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # the runtime cannot read the file: said to the parent, which refuses it
        send(RuntimeError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__))
        return
    send({"version": ort.__version__, "inputs": [i.name for i in session.get_inputs()],
          "threads": session.get_session_options().intra_op_num_threads})
    while True:
        header = sys.stdin.buffer.read(8)
        if len(header) < 8:
            return
        (size,) = struct.unpack("<Q", header)
        feeds = pickle.loads(sys.stdin.buffer.read(size))
        try:
            send(session.run(None, feeds))
        except Exception as exc:
            send(RuntimeError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__))


if __name__ == "__main__":
    main()
