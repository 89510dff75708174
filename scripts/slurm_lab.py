"""A throwaway Slurm cluster on this one host: `make slurm-lab` / `make slurm-lab-stop`, and the Slurm tests.

    python3 scripts/slurm_lab.py start   # prints `export NAME=value` lines for the console
    python3 scripts/slurm_lab.py stop    # stops every daemon it started
    python3 scripts/slurm_lab.py env     # prints the settings again

Debian's Slurm 22.05: munged,
MariaDB under slurmdbd for accounting, slurmctld, one slurmd per node name — every node answers on
127.0.0.1 at its own port — and slurmrestd with JWT. The nodes carry fake GPUs of two types: Slurm
22.05 drops a file-less GPU line from gres.conf, so each GPU is a character device made with mknod
(``/dev/null``'s numbers), which is enough for Slurm to count it and set ``CUDA_VISIBLE_DEVICES``.

Everything lives in one folder (``SLURM_LAB_DIR``, default ``var/slurm-lab``) and on ports from
``SLURM_LAB_PORT`` (default 16817) upwards; nothing outside it is touched but the Debian packages
(installed when run as root) and a system user for slurmrestd, which refuses to run as root. MariaDB and
slurmrestd run as their own users and must enter that folder: in a checkout only its owner may enter (a
Debian home, ``/root``), the default folder is ``/var/lib/cluster-ops/slurm-lab-<checkout's hash>`` instead.

A start that fails stops every daemon it started and removes the database it had not finished making, so the
next start begins clean.
Standard library only: it runs before the virtual environment exists.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("slurm-wlm", "slurmctld", "slurmd", "slurmdbd", "slurmrestd", "munge", "slurm-wlm-jwt-plugin",
            "slurm-client", "mariadb-server")
COMMANDS = ("slurmctld", "slurmd", "slurmdbd", "slurmrestd", "munged", "mariadbd", "mariadb-install-db", "sbatch")
CLUSTER = "lab"
REST_USER = "slurmrestd-lab"  # slurmrestd refuses root; it runs as this system user
ACCOUNTS = ("research", "vision", "nlp")  # Slurm accounts = the console's tenants
# Two GPU types, two nodes each: a heterogeneous cluster, as Sia schedules.
NODES = (("gpu01", "a100", 4), ("gpu02", "a100", 4), ("gpu03", "v100", 4), ("gpu04", "v100", 4))
START_TIMEOUT = 60.0
SHARED_LABS = Path("/var/lib/cluster-ops")  # where a lab goes when the checkout is closed to other users
DATABASE_READY = ".lab-ready"  # written into the MariaDB folder once it is made and its users granted


def enterable_by_all(folder: Path) -> bool:
    """Whether every existing folder from ``/`` down to ``folder`` lets other users through (o+x)."""
    for path in (folder, *folder.parents):
        if path.exists() and not path.stat().st_mode & 0o001:
            return False
    return True


def lab_root(requested: str | None, repo: Path = REPO) -> Path:
    """``SLURM_LAB_DIR`` as given, else ``var/slurm-lab`` in the checkout when the daemons' users can enter it,
    else a folder of its own under ``SHARED_LABS`` (one per checkout)."""
    if requested:
        return Path(requested).resolve()
    inside = (repo / "var" / "slurm-lab").resolve()
    if enterable_by_all(inside.parent):
        return inside
    return SHARED_LABS / f"slurm-lab-{hashlib.sha256(str(repo).encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class Lab:
    root: Path
    port: int

    @classmethod
    def from_environment(cls) -> Lab:
        return cls(lab_root(os.environ.get("SLURM_LAB_DIR")), int(os.environ.get("SLURM_LAB_PORT", "16817")))

    # Ports: slurmctld, slurmdbd, MariaDB, slurmrestd, then one per slurmd.
    @property
    def ctld_port(self) -> int:
        return self.port

    @property
    def dbd_port(self) -> int:
        return self.port + 1

    @property
    def db_port(self) -> int:
        return self.port + 2

    @property
    def rest_port(self) -> int:
        return self.port + 3

    def node_port(self, number: int) -> int:
        return self.port + 10 + number

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    @property
    def slurm_conf(self) -> Path:
        return self.path("etc", "slurm.conf")

    @property
    def jwt_key(self) -> Path:
        return self.path("etc", "jwt_hs256.key")

    # Slurm 22.05 ignores AuthInfo's socket for slurmctld's connection to slurmdbd: munged must answer on its
    # default socket, so the lab's munged is this host's munged while the lab runs.
    munge_socket = Path("/run/munge/munge.socket.2")

    @property
    def script_dir(self) -> Path:
        return self.path("jobs")

    def environment(self) -> dict[str, str]:
        """What the console and the Slurm commands need to reach this lab."""
        return {
            "CLUSTER_BACKEND": "slurm",
            "SLURM_CONF": str(self.slurm_conf),
            "SLURM_REST_URL": f"http://127.0.0.1:{self.rest_port}",
            "SLURM_USER": "root",
            "SLURM_JWT_FILE": str(self.path("etc", "console.jwt")),
            "SLURM_SCRIPT_DIR": str(self.script_dir),
            "SLURM_DEMO_JOBS": "6",  # `make run` submits six example jobs to the empty lab
        }


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "start"
    lab = Lab.from_environment()
    if command == "start":
        start(lab)
    elif command == "stop":
        stop(lab)
    elif command == "env":
        print_environment(lab)
    elif command == "stop-controller":  # a Slurm outage, as the tests make one
        stop_controller(lab)
    elif command == "start-controller":
        start_controller(lab)
    else:
        print(f"usage: {argv[0]} start|stop|env|stop-controller|start-controller", file=sys.stderr)
        return 2
    return 0


def start(lab: Lab) -> None:
    if os.geteuid() != 0:
        sys.exit("The Slurm lab starts munged, MariaDB, slurmctld, slurmd and slurmrestd under their own users: "
                 "run it as root (sudo make slurm-lab)")
    install_packages()
    stop(lab, quiet=True)
    if not enterable_by_all(lab.root.parent):
        sys.exit(f"Slurm lab: {lab.root.parent} is closed to other users (a folder on its way lacks o+x); MariaDB "
                 "and slurmrestd run as their own users and must enter it: choose another SLURM_LAB_DIR")
    try:
        start_daemons(lab)
    except BaseException:
        # Nothing half-started or half-made is left for the next start to trip over.
        stop(lab, quiet=True)
        remove_unfinished_database(lab)
        raise
    print_environment(lab)


def start_daemons(lab: Lab) -> None:
    write_files(lab)
    start_munge(lab)
    start_database(lab)
    start_daemon(lab, "slurmdbd", ["slurmdbd", "-D"], {"SLURM_CONF": str(lab.slurm_conf)}, port=lab.dbd_port)
    start_controller(lab)
    add_associations(lab)
    for number, (name, _, _) in enumerate(NODES):
        start_daemon(lab, f"slurmd-{name}", ["slurmd", "-D", "-N", name, "-f", str(lab.slurm_conf)], {},
                     port=lab.node_port(number))
    wait_for_nodes(lab)
    start_rest(lab)
    write_token(lab)


def start_controller(lab: Lab) -> None:
    """slurmctld, recovering its state (jobs included) from StateSaveLocation."""
    start_daemon(lab, "slurmctld", ["slurmctld", "-D", "-f", str(lab.slurm_conf)], {}, port=lab.ctld_port)


def stop_controller(lab: Lab) -> None:
    _terminate(int(lab.path("run", "slurmctld.lab-pid").read_text()))


def print_environment(lab: Lab) -> None:
    for name, value in lab.environment().items():
        print(f"export {name}={value}")


def install_packages() -> None:
    if all(shutil.which(command) or Path("/usr/sbin", command).exists() for command in COMMANDS):
        return
    if os.geteuid() != 0:
        sys.exit("Slurm is not installed; as root: apt-get install -y --no-install-recommends " + " ".join(PACKAGES))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def write_files(lab: Lab) -> None:
    for stale in ("state", "spool"):  # a new lab starts with no jobs (accounting keeps its history)
        shutil.rmtree(lab.path(stale), ignore_errors=True)
    if lab.root.parent == SHARED_LABS:
        SHARED_LABS.mkdir(parents=True, exist_ok=True)
        SHARED_LABS.chmod(0o755)
    for folder in ("", "etc", "log", "run", "state", "dev", "jobs"):
        lab.path(folder).mkdir(parents=True, exist_ok=True)
        lab.path(folder).chmod(0o755)  # whatever the umask: the daemons' users read the configuration here
    for name, _, count in NODES:
        lab.path("spool", name).mkdir(parents=True, exist_ok=True)
        for index in range(count):
            device = lab.path("dev", f"fakegpu-{name}-{index}")
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, like /dev/null
    lab.script_dir.chmod(0o755)
    if not lab.jwt_key.exists():
        lab.jwt_key.write_bytes(secrets.token_bytes(32))
    lab.jwt_key.chmod(0o600)
    lab.slurm_conf.write_text(slurm_conf(lab))
    lab.path("etc", "gres.conf").write_text(gres_conf(lab))
    dbd_conf = lab.path("etc", "slurmdbd.conf")
    dbd_conf.write_text(slurmdbd_conf(lab))
    dbd_conf.chmod(0o600)  # slurmdbd refuses a readable configuration: it holds the database password


def slurm_conf(lab: Lab) -> str:
    nodes = "\n".join(
        f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={lab.node_port(number)} CPUs=8 "
        f"RealMemory=16000 Gres=gpu:{kind}:{count} State=UNKNOWN"
        for number, (name, kind, count) in enumerate(NODES)
    )
    return f"""# Written by scripts/slurm_lab.py: a throwaway lab, do not edit.
ClusterName={CLUSTER}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={lab.ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={lab.jwt_key}
StateSaveLocation={lab.path("state")}
SlurmdSpoolDir={lab.path("spool")}/%n
SlurmctldPidFile={lab.path("run", "slurmctld.pid")}
SlurmdPidFile={lab.path("run")}/slurmd-%n.pid
SlurmctldLogFile={lab.path("log", "slurmctld.log")}
SlurmdLogFile={lab.path("log")}/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobRequeue=1
FirstJobId={first_job_id(lab)}
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
AccountingStoreFlags=job_comment
SchedulerType=sched/backfill
PriorityType=priority/multifactor
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={lab.dbd_port}
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=10
MinJobAge=600
InactiveLimit=0
{nodes}
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def first_job_id(lab: Lab) -> int:
    """Each start of the lab forgets its jobs but not its accounting: job ids start where no earlier lab's did
    (the clock, in tens of seconds), so that ``sacct`` never shows two jobs under one id."""
    return 1 + (int(time.time()) // 10) % 60_000_000


def gres_conf(lab: Lab) -> str:
    lines = ["AutoDetect=off"]
    for name, kind, count in NODES:
        lines.append(f"NodeName={name} Name=gpu Type={kind} File={lab.path('dev')}/fakegpu-{name}-[0-{count - 1}]")
    return "\n".join(lines) + "\n"


def slurmdbd_conf(lab: Lab) -> str:
    return f"""AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={lab.jwt_key}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={lab.dbd_port}
SlurmUser=root
PidFile={lab.path("run", "slurmdbd.pid")}
LogFile={lab.path("log", "slurmdbd.log")}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={lab.db_port}
StorageUser=slurm
StoragePass=lab
StorageLoc=slurm_acct_db
"""


def munge_answers() -> bool:
    """A munged already serves this host's socket (another lab's, or the host's own): Slurm's daemons of every
    lab authenticate through that one socket, so it is used as it is."""
    encoded = subprocess.run(["munge", "-n"], capture_output=True)
    return encoded.returncode == 0 and subprocess.run(["unmunge"], input=encoded.stdout,
                                                      capture_output=True).returncode == 0


def start_munge(lab: Lab) -> None:
    if munge_answers():
        return
    # munged runs as its own user and checks every folder above its files: they live beside its socket.
    folder = lab.munge_socket.parent
    folder.mkdir(parents=True, exist_ok=True)
    shutil.chown(folder, "munge", "munge")
    folder.chmod(0o755)  # clients connect to the socket inside
    key = folder / "cluster-ops-lab.key"
    if not key.exists():
        key.write_bytes(secrets.token_bytes(1024))
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    pid_file = folder / "cluster-ops-lab.pid"
    subprocess.run(["runuser", "-u", "munge", "--", "munged", f"--socket={lab.munge_socket}", f"--key-file={key}",
                    f"--pid-file={pid_file}", f"--log-file={folder / 'cluster-ops-lab.log'}",
                    f"--seed-file={folder / 'cluster-ops-lab.seed'}", "--force"], check=True)
    lab.path("run", "munged.pid-file").write_text(str(pid_file))  # before waiting: a failed start stops it too
    wait_until(munge_answers, "munged answering")


def remove_unfinished_database(lab: Lab) -> None:
    data = lab.path("mariadb")
    if data.exists() and not (data / DATABASE_READY).exists():
        shutil.rmtree(data, ignore_errors=True)


def start_database(lab: Lab) -> None:
    data = lab.path("mariadb")
    remove_unfinished_database(lab)  # an earlier start that failed while making it
    fresh = not data.exists()
    if fresh:
        data.mkdir()
        shutil.chown(data, "mysql", "mysql")
        subprocess.run(["mariadb-install-db", "--user=mysql", f"--datadir={data}",
                        "--auth-root-authentication-method=socket", "--skip-test-db"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start_daemon(lab, "mariadbd", ["mariadbd", "--user=mysql", f"--datadir={data}", "--bind-address=127.0.0.1",
                                   f"--port={lab.db_port}", f"--socket={data / 'mysqld.sock'}",
                                   f"--pid-file={data / 'mariadbd.pid'}", "--skip-log-bin"], {}, port=lab.db_port)
    if fresh:
        sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'lab';"
               "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'lab';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
        subprocess.run(["mariadb", f"--socket={data / 'mysqld.sock'}", "-e", sql], check=True)
        (data / DATABASE_READY).write_text("made and granted\n")


def start_daemon(lab: Lab, name: str, command: list[str], env: dict[str, str], port: int | None = None,
                 user: str | None = None) -> None:
    """Start ``command`` in the foreground mode of its daemon, in its own session, logging to log/<name>.out."""
    if port is not None and port_open(port):  # else another program's answer would pass for the daemon's
        raise SystemExit(f"Slurm lab: port {port} (for {name}) is taken by another program; choose another "
                         "SLURM_LAB_PORT")
    prefix = ["runuser", "-u", user, "--"] if user else []
    with open(lab.path("log", f"{name}.out"), "ab") as log:
        process = subprocess.Popen(prefix + command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=dict(os.environ, **env), cwd=lab.root)
    lab.path("run", f"{name}.lab-pid").write_text(str(process.pid))
    if port is not None:
        wait_until(lambda: process.poll() is None and port_open(port), f"{name} on port {port}",
                   failed=lambda: process.poll() is not None, log=lab.path("log", f"{name}.out"))


def add_associations(lab: Lab) -> None:
    def sacctmgr(*args: str) -> None:
        subprocess.run(["sacctmgr", "-i", *args], check=False, env=slurm_env(lab),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    wait_until(lambda: subprocess.run(["sacctmgr", "-n", "list", "cluster"], env=slurm_env(lab),
                                      capture_output=True).returncode == 0, "slurmdbd answering")
    sacctmgr("add", "cluster", CLUSTER)
    for account in ACCOUNTS:
        sacctmgr("add", "account", account, f"cluster={CLUSTER}", f"Description={account}", "Organization=lab")
    sacctmgr("add", "user", "root", f"account={','.join(ACCOUNTS)}", f"cluster={CLUSTER}")
    sacctmgr("modify", "user", "root", "set", f"DefaultAccount={ACCOUNTS[0]}")


def wait_for_nodes(lab: Lab) -> None:
    def all_idle() -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=slurm_env(lab), capture_output=True, text=True)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return len(states) == len(NODES) and all(state == "idle" for state in states.values())

    wait_until(all_idle, "every slurmd idle", log=lab.path("log", "slurmctld.log"))


def start_rest(lab: Lab) -> None:
    if subprocess.run(["id", REST_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", REST_USER],
                       check=True)
    env = {"SLURM_CONF": str(lab.slurm_conf), "SLURM_JWT": "daemon"}
    start_daemon(lab, "slurmrestd", ["slurmrestd", "-a", "rest_auth/jwt", "-s", "openapi/v0.0.38,openapi/dbv0.0.38",
                                     f"127.0.0.1:{lab.rest_port}"], env, port=lab.rest_port, user=REST_USER)


def write_token(lab: Lab, lifespan: int = 7 * 24 * 3600) -> None:
    out = subprocess.run(["scontrol", "token", "username=root", f"lifespan={lifespan}"], env=slurm_env(lab),
                         capture_output=True, text=True, check=True).stdout
    token_file = Path(lab.environment()["SLURM_JWT_FILE"])
    token_file.write_text(out.strip().removeprefix("SLURM_JWT=") + "\n")
    token_file.chmod(0o600)


def stop(lab: Lab, quiet: bool = False) -> None:
    """Stop every daemon this lab started (by the pids it wrote), slurmrestd and the slurmds first."""
    run = lab.path("run")
    if not run.exists():
        return
    pid_files = sorted(run.glob("*.lab-pid"), key=lambda p: ("mariadbd" in p.name, "munge" in p.name, p.name))
    for pid_file in pid_files:
        _terminate(int(pid_file.read_text()))
        pid_file.unlink()
    munge_started = lab.path("run", "munged.pid-file")  # only a munged this lab started is stopped
    if munge_started.exists():
        pid_file = Path(munge_started.read_text())
        if pid_file.exists():
            _terminate(int(pid_file.read_text()))
        munge_started.unlink()
    if not quiet:
        print(f"Slurm lab in {lab.root} stopped")


def _terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM to ``pid``'s process group (a daemon started in its own session), or to ``pid`` alone when it leads
    none (munged forks twice: its pid is not its group's); SIGKILL after ``grace`` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it when it is our child (the tests start the lab in-process)
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def slurm_env(lab: Lab) -> dict[str, str]:
    return dict(os.environ, SLURM_CONF=str(lab.slurm_conf))


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_until(ready, what: str, failed=lambda: False, log: Path | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ready():
            return
        if failed():
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    raise SystemExit(f"Slurm lab: no {what} after {START_TIMEOUT:.0f} s\n{tail}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
