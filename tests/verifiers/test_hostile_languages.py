"""The hostile-code attack classes of ``test_hostile.py``, written in C++ and JavaScript, plus compile-time
bombs: each runs as root through the full sandbox (``ProgramVerifier``), must be scored wrong, must leave
no process behind and must leave the host untouched.

A probe prints ``escaped`` only when its attack reached something it must not (a host file, the network,
a secret, another process); the verdict, decided outside, says whether it did, so a probe that passes
is a hole. Resource attacks (fork, thread, memory, disk, output bombs, loops) must end within their
limits as wrong answers.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from dapo_env.verifiers.code import CallTest, IOTest, ProgramTests, ProgramVerifier, get_language
from dapo_env.verifiers.code.sandbox import SandboxLimits, isolation

LIMITS = SandboxLimits(wall_s=3.0, memory_mb=256, disk_mb=8, max_processes=4, max_output_bytes=10_000)
# The compile run's own limits, shorter than the language's default so that bombs end fast
COMPILE = SandboxLimits(wall_s=6.0, memory_mb=1024, disk_mb=64, max_processes=8, max_output_bytes=1 << 16)
PROBE = ProgramTests(io=(IOTest(input="", output="escaped\n"),))
UID_BASE = 0x20000000
REPO = Path(__file__).resolve().parents[2]
LANGUAGES = ("cpp", "javascript")


def _skip_reason(language: str) -> str | None:
    if not isolation("full").ok:
        return "the code sandbox needs bubblewrap: apt-get install bubblewrap"
    missing = get_language(language).missing()
    return f"{language}: {missing}" if missing else None


def each_language(codes: dict[str, str]) -> pytest.MarkDecorator:
    """Parametrize over (language, code), skipping a language this machine cannot run (with the fix)."""
    return pytest.mark.parametrize(("language", "code"), [
        pytest.param(lang, code, id=lang, marks=pytest.mark.skipif(_skip_reason(lang) is not None,
                                                                   reason=_skip_reason(lang) or ""))
        for lang, code in codes.items()])


def _live_sandbox_processes(marker: str | None = None) -> list[str]:
    """Host processes running as this test process's per-run sandbox uids, or whose command line holds
    ``marker`` (see ``sandbox._next_uid``)."""
    base = UID_BASE + ((os.getpid() & 0xFFFFFF) << 4)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rpartition(b")")[2].split()[0] == b"Z":
                    continue
            uid = os.stat(f"/proc/{entry}").st_uid
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, IndexError):
            continue
        if base <= uid < base + 16 or (marker and marker in cmdline and "pytest" not in cmdline):
            found.append(f"{entry} uid={uid} {cmdline[:120]}")
    return found


def _wrong(language: str, code: str, tests: ProgramTests = PROBE, marker: str | None = None,
           limits: SandboxLimits = LIMITS, ran: bool = False) -> str:
    """Verify ``code``: it must be scored wrong in bounded time and leave no process behind. With ``ran``
    the probe must have run to its end and said ``contained`` (so it failed for what it tried)."""
    start = time.monotonic()
    fence = {"cpp": "cpp", "javascript": "javascript"}[language]
    report = ProgramVerifier(language=language, scoring="fraction", limits=limits, compile_limits=COMPILE).report(
        f"```{fence}\n{code}\n```", tests)
    assert not report.result.correct and report.result.score == 0.0, report
    assert time.monotonic() - start < 60, "the limits did not hold"
    deadline = time.monotonic() + 10.0
    while _live_sandbox_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _live_sandbox_processes(marker), _live_sandbox_processes(marker)
    if ran:
        assert "printed 'contained\\n'" in report.tests[0].message, report.tests[0].message
    return report.result.reason + " | " + " | ".join(t.message for t in report.tests)


CPP_HEAD = ("#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n#include <string>\n#include <vector>\n"
            "#include <unistd.h>\n#include <signal.h>\n#include <fcntl.h>\n#include <dirent.h>\n"
            "#include <sys/socket.h>\n#include <netinet/in.h>\n#include <arpa/inet.h>\n#include <cctype>\n")


SOLVED = ProgramTests(io=(IOTest(input="2 3\n", output="5\n"),))


@each_language({
    "cpp": "#include <iostream>\nint main() { int a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').split(' ').map(Number);\nconsole.log(a + b);",
})
def test_a_right_program_passes_under_the_same_limits(language: str, code: str) -> None:
    """The control: under these limits a right program passes, so the attacks below fail for what they do."""
    verifier = ProgramVerifier(language=language, limits=LIMITS, compile_limits=COMPILE)
    assert verifier(f"```{language}\n{code}\n```", SOLVED).reason == "passed:1/1"


# --- resources -------------------------------------------------------------------------------------------
@each_language({
    "cpp": CPP_HEAD + "int main() { while (true) fork(); }",
    "javascript": "const cp = require('child_process');\n"
                  "while (true) { try { cp.spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']); } catch (e) {} }",
})
def test_fork_bombs_are_contained(language: str, code: str) -> None:
    _wrong(language, code)


@each_language({
    "cpp": CPP_HEAD + "#include <thread>\nint main() { std::vector<std::thread> t;\n"
                      "  while (true) { try { t.emplace_back([] { sleep(30); }); } catch (...) {} } }",
    "javascript": "const { Worker } = require('worker_threads');\n"
                  "while (true) { try { new Worker('setInterval(() => {}, 1000)', { eval: true }); } catch (e) {} }",
})
def test_thread_bombs_are_contained(language: str, code: str) -> None:
    _wrong(language, code)


@each_language({
    "cpp": CPP_HEAD + "int main() { std::vector<char*> v; while (true) { char* p = (char*)malloc(1 << 24);\n"
                      "  if (p) { memset(p, 1, 1 << 24); v.push_back(p); } } }",
    "javascript": "const keep = [];\nwhile (true) { try { keep.push(Buffer.alloc(1 << 24, 1)); } catch (e) {} }",
})
def test_memory_bombs_are_contained(language: str, code: str) -> None:
    _wrong(language, code)


def test_js_heap_and_wasm_bombs_are_contained() -> None:
    if (reason := _skip_reason("javascript")) is not None:
        pytest.skip(reason)
    _wrong("javascript", "const keep = [];\nwhile (true) keep.push(new Array(1e6).fill(1.5));")
    _wrong("javascript", "const m = [];\nfor (let i = 0; i < 64; i++) m.push(new WebAssembly.Memory({initial: 65536}));\n"
                         "console.log('escaped');")


@each_language({
    "cpp": CPP_HEAD + "int main() { FILE* f = fopen(\"big\", \"wb\"); static char b[1 << 20];\n"
                      "  memset(b, 'x', sizeof b); long n = 0; while (fwrite(b, 1, sizeof b, f) == sizeof b) n++;\n"
                      "  printf(n > 8 ? \"escaped\\n\" : \"contained\\n\"); }",
    "javascript": "const fs = require('fs'); const fd = fs.openSync('big', 'w'); const b = Buffer.alloc(1 << 20, 120);\n"
                  "let n = 0; try { while (true) { fs.writeSync(fd, b); n++; } } catch (e) {}\n"
                  "console.log(n > 8 ? 'escaped' : 'contained');",
})
def test_the_disk_is_capped(language: str, code: str) -> None:
    _wrong(language, code, ran=True)


@each_language({
    "cpp": CPP_HEAD + "int main() { while (true) fputs(\"escaped\\n\", stdout); }",
    "javascript": "const fs = require('fs'); const b = Buffer.from('escaped\\n'.repeat(1 << 16));\n"
                  "while (true) fs.writeSync(1, b);",
})
def test_output_bombs_are_cut(language: str, code: str) -> None:
    assert "output limit" in _wrong(language, code)


@each_language({
    "cpp": "int main() { volatile long x = 0; while (true) x++; }",
    "javascript": "setInterval(() => {}, 1000);\nconsole.log('contained');\nwhile (true) {}",
})
def test_endless_programs_end_at_the_time_limit(language: str, code: str) -> None:
    start = time.monotonic()
    assert "time limit" in _wrong(language, code)
    assert time.monotonic() - start < LIMITS.wall_s + 30  # compile time included, on a loaded machine


# --- probes: host files, network, secrets, other processes -------------------------------------------------
def _targets(tmp_path: Path) -> list[str]:
    name = f"dapo-hostile-{uuid.uuid4().hex}"
    return [f"/tmp/{name}", f"/dev/shm/{name}", str(tmp_path / name), str(REPO / name), f"/root/{name}",
            f"/usr/{name}", f"/{name}"]


def test_host_files_cannot_be_written(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    codes = {
        "cpp": CPP_HEAD + "int main() { const char* t[] = {" + ", ".join(f'"{t}"' for t in targets) + "};\n"
               "  bool out = false; for (const char* p : t) { int fd = open(p, O_WRONLY | O_CREAT, 0644);\n"
               "    if (fd >= 0 && strncmp(p, \"/tmp/\", 5) != 0) out = true; }\n"
               "  puts(out ? \"escaped\" : \"contained\"); }",
        "javascript": "const fs = require('fs'); let out = false;\n"
                      f"for (const p of {targets!r}) {{ try {{ fs.writeFileSync(p, 'x'); if (!p.startsWith('/tmp/')) out = true; }}"
                      " catch (e) {} }\nconsole.log(out ? 'escaped' : 'contained');",
    }
    for language, code in codes.items():
        if _skip_reason(language) is None:
            _wrong(language, code, ran=True)
    for target in targets:
        assert not os.path.exists(target), target


def test_no_connection_to_any_address_loopback_included() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    hosts = ["127.0.0.1", "0.0.0.0", "10.0.0.1", "8.8.8.8"]
    codes = {
        "cpp": CPP_HEAD + "int main() { const char* h[] = {" + ", ".join(f'"{h}"' for h in hosts) + "};\n"
               "  for (const char* host : h) { int s = socket(AF_INET, SOCK_STREAM, 0); if (s < 0) continue;\n"
               f"    sockaddr_in a{{}}; a.sin_family = AF_INET; a.sin_port = htons({port}); inet_pton(AF_INET, host, &a.sin_addr);\n"
               "    if (connect(s, (sockaddr*)&a, sizeof a) == 0) { puts(\"escaped\"); return 0; } }\n"
               "  puts(\"contained\"); }",
        "javascript": "const net = require('net');\n"
                      f"const tries = {hosts!r}.map(h => new Promise(ok => {{\n"
                      f"  const s = net.connect({{port: {port}, host: h, timeout: 500}});\n"
                      "  s.on('connect', () => ok(true)); s.on('error', () => ok(false)); s.on('timeout', () => ok(false)); }));\n"
                      "Promise.all(tries).then(r => { console.log(r.some(Boolean) ? 'escaped' : 'contained'); process.exit(0); });",
    }
    try:
        for language, code in codes.items():
            if _skip_reason(language) is None:
                _wrong(language, code, ran=True)
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert not accepted


def test_host_secrets_are_unreadable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = uuid.uuid4().hex
    monkeypatch.setenv("DAPO_TEST_SECRET", secret)
    (tmp_path / "secret.txt").write_text(secret)
    paths = ["/etc/shadow", "/etc/passwd", str(tmp_path / "secret.txt"), "/root/.bashrc", "/proc/1/environ"]
    codes = {
        "cpp": CPP_HEAD + "extern char** environ;\nint main() { std::string all;\n"
               "  for (char** e = environ; *e; e++) all += *e;\n"
               "  const char* p[] = {" + ", ".join(f'"{p}"' for p in paths) + "};\n"
               "  std::vector<std::string> files(p, p + 5);\n"
               "  if (DIR* d = opendir(\"/proc\")) { while (dirent* e = readdir(d)) files.push_back(std::string(\"/proc/\") + e->d_name + \"/environ\"); closedir(d); }\n"
               "  for (auto& f : files) { FILE* h = fopen(f.c_str(), \"rb\"); if (!h) continue; char b[4096]; size_t n;\n"
               "    while ((n = fread(b, 1, sizeof b, h)) > 0) all.append(b, n); fclose(h); }\n"
               f"  puts(all.find(\"{secret}\") != std::string::npos || all.find(\"root:\") != std::string::npos ? \"escaped\" : \"contained\"); }}",
        "javascript": "const fs = require('fs'); let all = JSON.stringify(process.env);\n"
                      f"const files = {paths!r};\n"
                      "try { for (const e of fs.readdirSync('/proc')) files.push('/proc/' + e + '/environ'); } catch (e) {}\n"
                      "for (const f of files) { try { all += fs.readFileSync(f, 'latin1'); } catch (e) {} }\n"
                      f"console.log(all.includes('{secret}') || all.includes('root:') ? 'escaped' : 'contained');",
    }
    for language, code in codes.items():
        if _skip_reason(language) is None:
            reason = _wrong(language, code, ran=True)
            assert secret not in reason


def test_the_caller_and_other_processes_cannot_be_signalled() -> None:
    sentinel = os.fork()
    if sentinel == 0:
        time.sleep(60)
        os._exit(0)
    targets = [os.getpid(), sentinel, 1]
    codes = {
        "cpp": CPP_HEAD + "int main() { int hit = 0; int t[] = {" + ", ".join(map(str, targets)) + "};\n"
               "  for (int p : t) hit += kill(p, SIGKILL) == 0 && p > 2;\n"
               "  for (int p = 2; p < 4000; p++) if (p != getpid()) kill(p, SIGKILL);\n"
               "  puts(hit ? \"escaped\" : \"contained\"); fflush(stdout); kill(-1, SIGKILL); }",
        "javascript": f"let hit = 0;\nfor (const p of {targets!r}) {{ try {{ process.kill(p, 'SIGKILL'); if (p > 2) hit++; }} catch (e) {{}} }}\n"
                      "const own = require('fs').readdirSync('/proc/self/task').map(Number);  // its own threads\n"
                      "for (let p = 2; p < 4000; p++) { try { if (!own.includes(p)) process.kill(p, 'SIGKILL'); } catch (e) {} }\n"
                      "console.log(hit ? 'escaped' : 'contained');",
    }
    try:
        for language, code in codes.items():
            if _skip_reason(language) is None:
                _wrong(language, code, ran=True)
        assert os.waitpid(sentinel, os.WNOHANG) == (0, 0)  # still alive
    finally:
        os.kill(sentinel, 9)
        os.waitpid(sentinel, 0)


def test_no_child_outlives_its_run() -> None:
    marker = uuid.uuid4().hex[:12]
    codes = {
        "cpp": CPP_HEAD + "int main() { if (fork() == 0) { setsid(); if (fork() == 0) {\n"
               f"  execl(\"/bin/sh\", \"sh\", \"-c\", \"sleep 30 # {marker}\", (char*)0); }} _exit(0); }}\n"
               "  sleep(1); puts(\"contained\"); }",
        "javascript": "const cp = require('child_process');\n"
                      f"cp.spawn('/bin/sh', ['-c', 'sleep 30 # {marker}'], {{detached: true, stdio: 'ignore'}}).unref();\n"
                      "console.log('contained');",
    }
    for language, code in codes.items():
        if _skip_reason(language) is None:
            _wrong(language, code, marker=marker, ran=True)


@each_language({
    "cpp": CPP_HEAD + "int main() { int n = 0; if (DIR* d = opendir(\"/proc\")) { while (dirent* e = readdir(d))\n"
                      "  n += e->d_name[0] >= '0' && e->d_name[0] <= '9'; }\n"
                      "  puts(n > 8 || getuid() == 0 ? \"escaped\" : \"contained\"); }",
    "javascript": "const n = require('fs').readdirSync('/proc').filter(p => /^\\d+$/.test(p)).length;\n"
                  "console.log(n > 8 || process.getuid() === 0 ? 'escaped' : 'contained');",
})
def test_only_its_own_processes_are_visible(language: str, code: str) -> None:
    _wrong(language, code, ran=True)


def test_the_expected_output_is_nowhere_in_the_sandbox() -> None:
    """The expected output is a fresh secret; a program that searches everything it can read for it and
    prints what follows its known prefix finds nothing."""
    expected = f"ANSWER-{uuid.uuid4().hex}\n"
    tests = ProgramTests(io=(IOTest(input="what is it?\n", output=expected),))
    codes = {
        "cpp": CPP_HEAD + "#include <functional>\nint main() { std::string all;\n"
               "  std::function<void(std::string, int)> walk = [&](std::string d, int depth) {\n"
               "    DIR* h = opendir(d.c_str()); if (!h || depth > 1) return;\n"
               "    while (dirent* e = readdir(h)) { std::string n = e->d_name;\n"
               "      if (n == \".\" || n == \"..\" || n == \"sys\" || n == \"kmsg\" || n == \"kcore\") continue;\n"
               "      std::string p = d + \"/\" + n; if (e->d_type == DT_DIR) walk(p, depth + 1);\n"
               "      else if (FILE* f = fopen(p.c_str(), \"rb\")) { char b[65536]; size_t k = fread(b, 1, sizeof b, f); all.append(b, k); fclose(f); } }\n"
               "    closedir(h); };\n  walk(\"/proc\", 0); walk(\"/tmp\", 0); walk(\"/dev/shm\", 0);\n"
               "  for (size_t at = all.find(\"ANSWER-\"); at != std::string::npos; at = all.find(\"ANSWER-\", at + 1))\n"
               "    if (at + 7 < all.size() && isxdigit((unsigned char)all[at + 7])) { puts(all.substr(at, 39).c_str()); return 0; }\n"
               "  puts(\"none\"); }",
        "javascript": "const fs = require('fs'); let all = '';\n"
                      "function walk(d, depth) { if (depth > 1) return; let es = []; try { es = fs.readdirSync(d, {withFileTypes: true}); } catch (e) { return; }\n"
                      "  for (const e of es) { if (['sys', 'kmsg', 'kcore'].includes(e.name)) continue; const p = d + '/' + e.name;\n"
                      "    if (e.isDirectory()) walk(p, depth + 1); else { try { const fd = fs.openSync(p, 'r'); const b = Buffer.alloc(65536);\n"
                      "      const n = fs.readSync(fd, b, 0, b.length, null); all += b.toString('latin1', 0, n); fs.closeSync(fd); } catch (e) {} } } }\n"
                      "walk('/proc', 0); walk('/tmp', 0); walk('/dev/shm', 0);\nconst found = /ANSWER-[0-9a-f]{32}/.exec(all);\n"
                      "console.log(found ? found[0] : 'none');",
    }
    for language, code in codes.items():
        if _skip_reason(language) is None:
            said = _wrong(language, code, tests, limits=SandboxLimits(wall_s=10.0, memory_mb=512, disk_mb=8))
            assert expected.strip() not in said and "printed 'none\\n'" in said, said  # it searched everything


# --- compile-time bombs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    '#include "/dev/zero"\nint main() {}',
    '#include "/dev/urandom"\nint main() {}',
    '#include __FILE__\nint main() {}',
    '#include "/etc/shadow"\nint main() {}',
    "#define A(x) x x\n#define B(x) A(A(A(A(x))))\n#define C(x) B(B(B(B(x))))\n#define D(x) C(C(C(C(x))))\n"
    "int main() { long v = 0; D(D(v++;)) }",
    "template <int N> struct F { static constexpr long v = F<N - 1>::v + F<N - 2>::v + 1; };\n"
    "template <> struct F<0> { static constexpr long v = 1; };\ntemplate <> struct F<1> { static constexpr long v = 1; };\n"
    "int main() { return F<100000>::v; }",
    "#include <utility>\ntemplate <int N> struct P { using t = std::pair<typename P<N - 1>::t, typename P<N - 1>::t>; };\n"
    "template <> struct P<0> { using t = int; };\nint main() { P<64>::t x{}; return sizeof(x) > 0; }",
    "constexpr long spin() { long s = 0; for (long i = 0; i < (1L << 40); i++) s += i; return s; }\n"
    "constexpr long v = spin();\nint main() { return v; }",
], ids=["dev_zero", "dev_urandom", "self_include", "etc_shadow", "macro_bomb", "template_depth", "type_doubling",
        "constexpr_spin"])
def test_compile_time_bombs_are_compile_errors_in_bounded_time(source: str) -> None:
    if (reason := _skip_reason("cpp")) is not None:
        pytest.skip(reason)
    tests = ProgramTests(io=(IOTest(input="", output=""),))
    start = time.monotonic()
    report = ProgramVerifier(language="cpp", limits=LIMITS, compile_limits=COMPILE).report(
        f"```cpp\n{source}\n```", tests)
    assert report.result.reason == "compile_error", report
    assert time.monotonic() - start < COMPILE.wall_s + 15
    assert "root:" not in report.tests[0].message and len(report.tests[0].message) < 1500
    assert not _live_sandbox_processes()


# --- wrong passes through the call harness ---------------------------------------------------------------------
JS_FORGERIES = {
    "forged_records": "const fs = require('fs'); const fd = Number(process.argv[3]);\n"
                      "for (const f of [fd, 3, 4, 5, 6, 7]) { try { fs.writeSync(f, 'x V 0 3\\n' + '0'.repeat(32) + ' V 0 3\\n'); } catch (e) {} }\n"
                      "function add(a, b) { return a - b; }",
    "patched_stringify": "JSON.stringify = () => '3';\nObject.prototype.toJSON = function () { return 3; };\n"
                         "function add(a, b) { return a - b; }",
    "patched_writer": "const fs = require('fs'); const w = fs.writeSync;\n"
                      "fs.writeSync = (fd, s, ...r) => w(fd, String(s).replace(/ V (\\d+) .*/, ' V $1 3'), ...r);\n"
                      "function add(a, b) { return a - b; }",
    "early_exit": "process.exit(0);\nfunction add(a, b) { return a + b; }",
    "reads_payload": "const fs = require('fs'); let seen = '';\n"
                     "for (let f = 0; f < 20; f++) { try { seen += fs.readFileSync(f, 'utf8'); } catch (e) {} }\n"
                     "const m = /\"expected\"\\s*:\\s*(\\d+)/.exec(seen);\nfunction add() { return m ? Number(m[1]) : -1; }",
    "equals_anything": "function add() { return {valueOf: () => 3, toString: () => '3', toJSON: () => 3}; }",
    "thenable": "function add(a, b) { return Promise.resolve(a + b); }",
}


@pytest.mark.parametrize("name", sorted(JS_FORGERIES))
def test_js_call_harness_forgeries_pass_nothing(name: str) -> None:
    if (reason := _skip_reason("javascript")) is not None:
        pytest.skip(reason)
    tests = ProgramTests(calls=(CallTest(call="add(1, 2)", expected=3), CallTest(call="add(2, 2)", expected=4)))
    _wrong("javascript", JS_FORGERIES[name], tests)


def test_the_non_root_path_contains_them_too() -> None:
    """A child drops to an unprivileged uid (with the system's interpreter as the sandbox's launcher, which an
    unprivileged uid can run) and verifies a right program and a fork bomb in each language."""
    if os.geteuid() != 0:
        pytest.skip("this check forks a child that drops from root to an unprivileged uid; already unprivileged")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs /usr/bin/python3 (a system interpreter an unprivileged uid can run)")
    languages = [lang for lang in LANGUAGES if _skip_reason(lang) is None]
    if not languages:
        pytest.skip(_skip_reason("cpp") or "")
    from dapo_env.verifiers.code import sandbox

    right = {"cpp": "#include <iostream>\n// non-root\nint main() { int a, b; std::cin >> a >> b; std::cout << a + b; }",
             "javascript": "// non-root\nconst [a, b] = require('fs').readFileSync(0, 'utf8').split(' ').map(Number);\n"
                           "console.log(a + b);"}
    bomb = {"cpp": CPP_HEAD + "// non-root\nint main() { while (true) fork(); }",
            "javascript": "const cp = require('child_process');\n"
                          "while (true) { try { cp.spawnSync('/bin/sh', ['-c', 'sleep 30 &']); } catch (e) {} }"}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            system = os.path.realpath("/usr/bin/python3")
            sandbox.interpreter = lambda: system  # type: ignore[assignment]
            sandbox._prefix = lambda: "/usr"  # type: ignore[assignment]
            sandbox._probe_bwrap.cache_clear()
            said = []
            for lang in languages:
                verifier = ProgramVerifier(language=lang, limits=LIMITS, compile_limits=COMPILE)
                said.append(verifier(f"```{lang}\n{right[lang]}\n```", SOLVED).correct)
                said.append(verifier(f"```{lang}\n{bomb[lang]}\n```", SOLVED).correct)
            os.write(write, " ".join(map(str, said)).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    _, code = os.waitpid(pid, 0)
    answer = os.read(read, 100).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(code) == 0, answer
    assert answer == " ".join(["True False"] * len(languages)), answer
