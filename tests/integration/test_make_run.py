"""`make run` end to end: Redis, worker, beat and web come up; Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

import psutil
import pytest

from .conftest import free_port, wait_until

pytestmark = pytest.mark.integration


class Output:
    """Collects a process's output on a thread so that waiting never blocks on a pipe."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.text = ""
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            self.text += line

    def wait_for(self, pattern: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if re.search(pattern, self.text):
                return True
            time.sleep(0.2)
        return False


def processes_with(marker: str) -> list[int]:
    """PIDs whose environment carries ``marker``: everything `make run` started."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def supervised_pid(program: str, var_dir: Path) -> int | None:
    # The generated configuration names its paths: supervisorctl needs no VAR_DIR (it failed with a format error).
    env = {k: v for k, v in os.environ.items() if k != "VAR_DIR"}
    supervisorctl = str(Path(sys.executable).parent / "supervisorctl")
    status = subprocess.run([supervisorctl, "-c", str(var_dir / "supervisord.conf"), "status", program],
                            capture_output=True, text=True, env=env)
    found = re.search(r"RUNNING\s+pid (\d+)", status.stdout)
    return int(found.group(1)) if found else None


def survives_a_kill(program: str, var_dir: Path, base: str, output: Output) -> None:
    """SIGKILL one program's process group: supervisord starts it again, and the web answers all along."""
    before = supervised_pid(program, var_dir)
    assert before is not None, output.text[-3000:]
    os.killpg(before, signal.SIGKILL)
    deadline, answers = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        answers.append(urllib.request.urlopen(f"{base}/accounts/login/", timeout=5).status)
        after = supervised_pid(program, var_dir)
        if after not in (None, before):
            break
        time.sleep(0.5)
    assert after not in (None, before), f"{program} was not restarted\n{output.text[-3000:]}"
    assert set(answers) == {200}


def log_in_and_get(base: str, path: str, password: str) -> str:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    form = opener.open(f"{base}/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
    data = urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": token}).encode()
    opener.open(urllib.request.Request(f"{base}/accounts/login/", data, headers={"Referer": base}))
    return opener.open(f"{base}{path}").read().decode()


def stack_env(fixtures_dir: Path, var_dir: Path, marker: str, web_port: int) -> dict[str, str]:
    # The stack runs on its embedded defaults whatever this shell exported (a Slurm lab's export lines included).
    inherited = {k: v for k, v in os.environ.items()
                 if not k.startswith(("DJANGO", "SLURM_")) and k != "CLUSTER_BACKEND"}
    env = {
        **{k: v for k, v in inherited.items() if k not in ("DATABASE_URL", "REDIS_URL")},
        "VAR_DIR": str(var_dir), "EMBEDDED_REDIS_PORT": str(free_port()), "WEB_ADDRESS": f"127.0.0.1:{web_port}",
        "HEARTBEAT_SECONDS": "1", "DEMO_ROUND_SECONDS": "2", "ADMIN_PASSWORD": "stack-test-password",
        "TRACES_DIR": str(fixtures_dir),
        marker.split("=")[0]: marker.split("=")[1],
    }
    return env


def start_stack(repo_root: Path, env: dict[str, str]) -> tuple[subprocess.Popen, Output]:
    stack = subprocess.Popen(["make", "--no-print-directory", "run"], cwd=repo_root, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    return stack, Output(stack.stdout)


@pytest.mark.needs("make")
def test_make_run_serves_admin_beats_and_stops_cleanly(repo_root: Path, fixtures_dir: Path, tmp_path: Path) -> None:
    marker, web_port = f"CLUSTER_OPS_STACK_TEST={uuid.uuid4().hex}", free_port()
    stack, output = start_stack(repo_root, stack_env(fixtures_dir, tmp_path, marker, web_port))
    try:
        # The address is said once the site answers, not while gunicorn is still loading (it was ~36 s early).
        assert output.wait_for(rf"Cluster Ops answers on http://127\.0\.0\.1:{web_port}/", seconds=120), \
            output.text[-3000:]
        assert urllib.request.urlopen(f"http://127.0.0.1:{web_port}/accounts/login/", timeout=2).status == 200
        assert output.wait_for(r"heartbeat #2 from worker", seconds=120), output.text[-3000:]
        assert "created admin user" in output.text and "16 node(s), 3 tenant(s), 3 job(s) added" in output.text
        base = f"http://127.0.0.1:{web_port}"
        page = log_in_and_get(base, "/admin/scheduler/node/", "stack-test-password")
        assert "a100-00" in page and "v100-07" in page
        # Beat runs rounds on the demo cluster: its jobs start, with the reason in the audit trail.
        assert output.wait_for(r"scheduler\.run_round.*succeeded", seconds=60), output.text[-3000:]
        events = log_in_and_get(base, "/admin/scheduler/rescaleevent/?kind=start", "stack-test-password")
        assert "started on" in events or "GPUs" in events, events[-2000:]
        assert len(processes_with(marker)) >= 8  # supervisord, redis, four workers (+ children), beat, gunicorn
        for program in ("rounds", "redis"):  # one dead component took everything down
            survives_a_kill(program, tmp_path, base, output)
        beats = output.text.count("heartbeat #")  # the restarted round worker beats again, through the new Redis
        assert wait_until(lambda: output.text.count("heartbeat #") >= beats + 2, seconds=60), output.text[-3000:]
    finally:
        os.killpg(stack.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        stack.wait(timeout=60)
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == [], output.text[-3000:]


@pytest.mark.needs("make")
def test_no_process_outlives_its_supervisor_and_a_second_run_is_refused(repo_root: Path, fixtures_dir: Path,
                                                                        tmp_path: Path) -> None:
    """supervisord SIGKILLed left gunicorn, the workers, beat and Redis serving as orphans, and the next `make run`
    collided with them."""
    marker, web_port = f"CLUSTER_OPS_STACK_TEST={uuid.uuid4().hex}", free_port()
    env = stack_env(fixtures_dir, tmp_path / "first", marker, web_port)
    stack, output = start_stack(repo_root, env)
    try:
        assert output.wait_for(r"heartbeat #1 from worker", seconds=120), output.text[-3000:]
        again = subprocess.run(["make", "--no-print-directory", "run"], cwd=repo_root, text=True, timeout=120,
                               env={**env, "VAR_DIR": str(tmp_path / "second")}, capture_output=True)
        refusal = again.stdout + again.stderr
        assert again.returncode != 0 and f"port {web_port}" in refusal and "is held by pid" in refusal, refusal[-2000:]
        # Refused first, before it migrates, seeds or collects anything (it used to set everything up, then refuse).
        assert "Operations to perform" not in refusal and "manage.py check" not in refusal, refusal[-2000:]
        supervisor = int((tmp_path / "first" / "supervisord.pid").read_text())
        os.kill(supervisor, signal.SIGKILL)
        assert wait_until(lambda: processes_with(marker) == [], seconds=30), [
            " ".join(psutil.Process(pid).cmdline())[:100] for pid in processes_with(marker) if psutil.pid_exists(pid)]
    finally:
        for pid in processes_with(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stack.wait(timeout=60)
