"""The harness: the trusted code that runs first in every sandboxed interpreter of ``CodeVerifier``.

It runs as ``python -I -c HARNESS <payload_fd> <result_fd>``: it drains the job (the program, the steps of
``plan.py``, a per-run nonce) from the payload pipe, installs two audit hooks, runs the candidate,
then each step, and writes one record per result to the result pipe: ``"<nonce> <kind> <index> <json>"``
with kind ``V`` (a value step's value), ``Y`` (a value a test run inside yielded), ``P`` (a test run inside
finished), ``X`` (a step raised), ``C`` (the program itself raised), ``S`` (a stdio run's finish status),
``E`` (the end). The parent (``code.py``) reads only records that carry the nonce.

The reporter hook holds the nonce and the result descriptor in its closure and writes a record only for a
``dapo.record`` event raised from ``main()``'s own frame (the one frame that announced itself with
``dapo.start`` before the candidate ran); every other caller is ignored. The guard hook refuses the other
ways to reach that closure (gc object walks, other threads' frames, tracing, ``ctypes`` calls and raw
memory, ``/proc``) and OS-level escapes (sockets, subprocesses, ``fork``/``exec``/``kill``, writes outside
the working folder): an inner layer under the OS sandbox of ``sandbox.py``, which does the real isolation.
Values are encoded by their exact type as tagged JSON (``values.py`` decodes them): only data leaves
the sandbox.
"""

from __future__ import annotations

HARNESS = r"""
import os, sys

def install(nonce, result_fd, main_code):
    write, getframe, legit = os.write, sys._getframe, []

    def reporter(event, args):
        if event != "dapo.start" and event != "dapo.record":
            return
        frame = getframe(1)
        if frame.f_code is not main_code:
            return
        if event == "dapo.start":
            if not legit:
                legit.append(frame)
        elif legit and frame is legit[0] and len(args) == 3:
            write(result_fd, f"{nonce} {args[0]} {args[1]} {args[2]}\n".encode())

    # ctypes may load libraries (numpy imports it) but not call them or touch raw memory
    blocked = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.kill",
               "os.killpg", "os.system", "os.startfile", "os.pidfd_open", "signal.pidfd", "pty.",
               "ctypes.call_function", "ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at", "ctypes.dlsym",
               "ctypes.set_errno", "ctypes.get_errno", "sys._current_frames", "sys.settrace", "sys.setprofile",
               "gc.get_", "sys.addaudithook")
    workdir = os.path.realpath(os.getcwd())
    path_events = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                             "os.link", "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "os.chdir",
                             "shutil.move", "shutil.copyfile", "shutil.copytree", "os.mkfifo", "os.mknod"})
    realpath, fspath, join, getcwd = os.path.realpath, os.fspath, os.path.join, os.getcwd

    def as_text(path):
        try:
            path = fspath(path)
        except TypeError:
            return None
        return path.decode("utf-8", "replace") if isinstance(path, bytes) else path

    def resolved(path):
        path = as_text(path)
        return None if not isinstance(path, str) else realpath(join(getcwd(), path))

    def outside(path):
        full = resolved(path)
        return full is not None and full != workdir and not full.startswith(workdir + "/")

    def guard(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and args and not isinstance(args[0], int):
            full = resolved(args[0]) or ""
            if full == "/proc" or full.startswith(("/proc/", "/dev/fd")):
                raise PermissionError("sandbox: /proc (process memory, descriptors, environment) is not readable")
            mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & 0o3103)
            if writing and outside(args[0]):
                raise PermissionError("sandbox: writes outside the working directory are not allowed")
        elif event in path_events:
            for arg in args:
                if (isinstance(arg, (str, bytes)) or hasattr(arg, "__fspath__")) and outside(arg):
                    raise PermissionError(f"sandbox: {event} outside the working directory")

    sys.addaudithook(reporter)
    sys.addaudithook(guard)


def encode(value, depth=0, budget=[0]):
    # by type(), never isinstance(): a candidate object can fake __class__, not its type
    if depth == 0:
        budget[0] = 200000
    budget[0] -= 1
    if depth > 64 or budget[0] < 0:
        raise ValueError("value too deep or too large to report")
    t = type(value)
    if value is None or t is bool:
        return value
    if t.__module__ == "numpy" and t.__name__ in ("bool", "bool_"):
        return bool(value)
    if issubclass(t, int):
        return {"i": int.__repr__(value)}
    if issubclass(t, float):
        return {"f": float.hex(value)}
    if issubclass(t, complex):
        return {"c": [float.hex(complex.__getattribute__(value, "real")),
                      float.hex(complex.__getattribute__(value, "imag"))]}
    if issubclass(t, str):
        return {"s": str.__str__(value)}
    if issubclass(t, bytes):
        return {"y": bytes.hex(value)}
    if issubclass(t, bytearray):
        return {"Y": bytearray.hex(value)}
    if t is range:
        return {"r": [value.start, value.stop, value.step]}
    if issubclass(t, dict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    for kind, tag in ((list, "l"), (tuple, "t"), (frozenset, "F"), (set, "S")):
        if issubclass(t, kind):
            return {tag: [encode(x, depth + 1) for x in kind.__iter__(value)]}
    import numbers
    if issubclass(t, numbers.Integral):
        return {"i": int.__repr__(int(value))}
    if issubclass(t, numbers.Real):
        return {"f": float.hex(float(value))}
    return {"o": t.__name__}


def describe(exc):
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:
        text = type(exc).__name__
    return text[:300]


def main():
    payload_fd, result_fd = int(sys.argv[1]), int(sys.argv[2])
    chunks = []
    while True:
        chunk = os.read(payload_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(payload_fd)
    import json, builtins
    sys.set_int_max_str_digits(0)
    job = json.loads(b"".join(chunks))
    chunks = None
    install(job.pop("nonce"), result_fd, main.__code__)
    # Only immutable values from here on: candidate code can read this frame, not rebind its locals.
    mode, code, setup = str(job["mode"]), str(job["code"]), str(job["setup"])
    steps = tuple((str(k), int(i), str(s), bool(c)) for k, i, s, c in job["steps"])
    scope_param, scope_target = tuple(job["scope"] or ("", ""))
    test_function = str(job["test_function"])
    job = None
    audit, run, evaluate, compile_, exc_type, dumps = sys.audit, exec, eval, compile, BaseException, json.dumps
    stdout, is_int, dict_, pop, encode_, describe_ = sys.stdout, int, dict, dict.pop, encode, describe
    namespace = {"__name__": "__main__" if mode == "stdio" else "candidate", "__builtins__": builtins}
    saved_builtins = tuple(builtins.__dict__.items())
    audit("dapo.start")
    try:
        run(compile_(code, "<candidate>", "exec"), namespace)
        status = "ok"
    except SystemExit as stop:
        status = "ok" if stop.code is None or (type(stop.code) is is_int and stop.code == 0) else "exit"
    except exc_type as exc:
        status = "error"
        audit("dapo.record", "C", 0, dumps(describe_(exc)))
    if mode == "stdio":
        try:
            stdout.flush()
        except exc_type:
            status = "error"
        audit("dapo.record", "S", 0, status)
        audit("dapo.record", "E", 0, "end")
        return
    builtins.__dict__.clear()  # undo any monkeypatching of builtins before the tests run
    builtins.__dict__.update(saved_builtins)
    namespace["__builtins__"] = builtins
    try:
        run(compile_(setup, "<setup>", "exec"), namespace)
    except exc_type:
        pass
    scope, broken = None, ""
    for kind, index, source, scoped in steps:
        where = namespace
        if scoped:
            if scope is None:
                scope = dict_(namespace)
                scope[scope_param] = namespace.get(scope_target)
            where = scope
        if kind == "exec":
            try:
                run(compile_(source, "<test>", "exec"), where)
            except exc_type as exc:
                broken = broken or describe_(exc)
            continue
        if broken:
            audit("dapo.record", "X", index, dumps("an earlier statement of the test raised " + broken))
            continue
        try:
            if kind == "value":
                line = dumps(encode_(evaluate(compile_(source, "<test>", "eval"), where)))
                audit("dapo.record", "V", index, line)
            else:  # source defines a generator; each rewritten assert yields (k, value, ...) for the parent
                run(compile_(source, "<test>", "exec"), where)
                for item in pop(where, test_function)():
                    audit("dapo.record", "Y", index, dumps([item[0], *[encode_(v) for v in item[1:]]]))
                audit("dapo.record", "P", index, "0")
        except exc_type as exc:
            audit("dapo.record", "X", index, dumps(describe_(exc)))
    audit("dapo.record", "E", 0, "end")

main()
"""


__all__ = ["HARNESS"]
