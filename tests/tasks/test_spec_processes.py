"""Spec tasks are found in every process kind: a fresh interpreter and a spawn worker (through
``DAPO_ENV_TASK_PATH``), ``make_vec(..., "async")`` with spawned workers, a Ray task, and an installed package's
``dapo_env.tasks`` entry point; a broken spec never breaks ``import dapo_env``; two sources of one id fail
naming both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spec_files import math_spec

REPO = Path(__file__).resolve().parents[2]


def _env(search_path: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAPO_ENV_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    if search_path is not None:
        env["DAPO_ENV_TASK_PATH"] = search_path
    return env


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


MAKE_AND_STEP = ("import gymnasium as gym, dapo_env\nenv = gym.make('{id}')\nenv.reset(options={{'index': 0}})\n"
                 "print(env.step('so \\\\boxed{{9}}')[1], dapo_env.tasks.task_origin('{id}'))\n")


def test_fresh_interpreter_finds_specs_on_the_search_path(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    math_spec(first, name="PathMathA")
    spec_b = math_spec(second, name="PathMathB")
    proc = _python(MAKE_AND_STEP.format(id="PathMathA-v0") + MAKE_AND_STEP.format(id="PathMathB-v0"),
                   _env(os.pathsep.join([str(first), str(spec_b)])), tmp_path)  # a folder, then one file
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"1.0 spec {first / 'PathMathA.yaml'}", f"1.0 spec {spec_b}"]


def test_spawn_workers_of_an_async_vector_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium as gym

    math_spec(tmp_path, name="SpawnMath")
    monkeypatch.setenv("DAPO_ENV_TASK_PATH", str(tmp_path))  # inherited by the children, which never ran discovery
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    from dapo_env.tasks.discovery import load_spec_file

    load_spec_file(tmp_path / "SpawnMath.yaml")  # this process registers it as `import dapo_env` would
    # spawned workers start from nothing: each builds its env by id, found through DAPO_ENV_TASK_PATH
    envs = gym.make_vec("SpawnMath-v0", num_envs=2, vectorization_mode="async", vector_kwargs={"context": "spawn"})
    try:
        envs.reset(seed=0)
        _, rewards, terminated, _, _ = envs.step(["so \\boxed{9}", "so \\boxed{1234}"])
        assert terminated.all() and set(rewards) <= {0.0, 1.0}
    finally:
        envs.close()
    from dapo_env.tasks import unregister_task

    unregister_task("SpawnMath-v0")


def test_ray_task_makes_the_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install -e ".[ray]"')
    math_spec(tmp_path, name="RayMath")
    monkeypatch.setenv("DAPO_ENV_TASK_PATH", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    ray.init(num_cpus=1, object_store_memory=80 * 1024 * 1024, include_dashboard=False, log_to_driver=False)
    def step_in_worker(env_id: str) -> float:  # defined here: Ray ships it by value to a fresh worker
        import gymnasium as gym

        import dapo_env  # noqa: F401  (the worker's own import: discovery runs here)

        env = gym.make(env_id)
        env.reset(options={"index": 0})
        return float(env.step("so \\boxed{9}")[1])

    try:
        assert ray.get(ray.remote(step_in_worker).remote("RayMath-v0"), timeout=120) == 1.0
    finally:
        ray.shutdown()


def test_broken_spec_does_not_break_import(tmp_path: Path) -> None:
    math_spec(tmp_path, name="GoodMath")
    (tmp_path / "Broken.yaml").write_text("name: BrokenMath\ndata: {files: missing.jsonl}\n")
    (tmp_path / "garbage.yml").write_text("name: [\n")
    code = (MAKE_AND_STEP.format(id="GoodMath-v0") +
            "try:\n    gym.make('BrokenMath-v0')\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n")
    proc = _python(code, _env(str(tmp_path)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("1.0 spec")
    assert lines[1] == (f"TaskDataError {tmp_path / 'Broken.yaml'}: field 'data.files': data file 'missing.jsonl' "
                        f"does not exist (looked for {tmp_path / 'missing.jsonl'}; relative paths start at the spec's folder)")
    assert proc.stderr.count("TaskSourceWarning") == 2  # the broken spec and the unreadable one, once each


def test_one_id_from_two_spec_files_names_both(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    math_spec(first, name="DupMath"), math_spec(second, name="DupMath")
    proc = _python("import gymnasium as gym, dapo_env\ntry:\n    gym.make('DupMath-v0')\nexcept Exception as exc:\n"
                   "    print(exc)\n", _env(os.pathsep.join([str(first), str(second)])), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(f"DupMath-v0 is defined twice: by spec {first / 'DupMath.yaml'} and by "
                                          f"spec {second / 'DupMath.yaml'}")


def test_installed_package_is_found_through_its_entry_point(tmp_path: Path) -> None:
    """The one test that installs a package: a throwaway one, uninstalled at the end whatever happens."""
    from dapo_env.tasks.spec_cli import write_package

    spec = math_spec(tmp_path, name="PluginMath")
    os.chdir(tmp_path)  # write_package writes DIST/ into the current folder
    try:
        package = tmp_path / write_package("dapo-env-spec-probe", spec)
    finally:
        os.chdir(REPO)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    install = subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "-e", str(package)],
                             capture_output=True, text=True, timeout=300)
    try:
        assert install.returncode == 0, install.stderr
        proc = _python(MAKE_AND_STEP.format(id="PluginMath-v0"), _env(), tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == (f"1.0 spec {package / 'dapo_env_spec_probe' / 'PluginMath.yaml'} (entry point "
                                       "dapo_env_spec_probe = dapo_env_spec_probe:tasks (package dapo-env-spec-probe))")
        test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(package / "tests")],
                              env=_env(), cwd=package, capture_output=True, text=True, timeout=300)
        assert test.returncode == 0, test.stdout[-2000:]  # the package's own test validates its spec
    finally:
        subprocess.run([*pip, "uninstall", "-y", "dapo-env-spec-probe"], capture_output=True, timeout=300)
