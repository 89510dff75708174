"""A throwaway Slurm cluster on this one host: `make slurm-lab` / `make slurm-lab-stop`, and the Slurm tests.

    python3 scripts/slurm_lab.py start   # prints `export NAME=value` lines for the console
    python3 scripts/slurm_lab.py stop    # stops every daemon it started
    python3 scripts/slurm_lab.py env     # prints the settings again

munged, MariaDB under slurmdbd for
accounting, slurmctld, one slurmd per node name — every node answers on 127.0.0.1 at its own port — and
slurmrestd with JWT. The nodes carry fake GPUs of two types: Slurm drops a file-less GPU line from gres.conf,
so each GPU is a character device made with mknod (``/dev/null``'s numbers), which is enough for Slurm to count
it and set ``CUDA_VISIBLE_DEVICES``. Two Unix users, alice and bob, may submit to some of the accounts.

Two releases (``SLURM_LAB_RELEASE``): 24.11, the default (Debian 13), and 22.05 (Debian 12), each Debian's
packages in a root of their own made by debootstrap once per machine (``/var/cache/cluster-ops``), its daemons
run by chroot. The lab's folder, the checkout and the Python it runs are mounted into the root at their own
paths — as a real cluster shares its home and project folders — and ``bin/`` in the lab's folder holds that
release's own commands (``sinfo``, ``squeue``, ``sacct``, ``scontrol``, …), which the ``export`` lines put first
on ``PATH``. The database is this host's MariaDB.

Everything lives in one folder (``SLURM_LAB_DIR``, default ``var/slurm-lab``) and on ports from
``SLURM_LAB_PORT`` (default 16817) upwards; nothing outside it is touched but the roots, this host's MariaDB and
debootstrap packages (installed when missing), the lab's users, and a system user for slurmrestd, which refuses
to run as root. MariaDB and slurmrestd run as their own users and must enter that folder: in a checkout only its
owner may enter (a Debian home, ``/root``), the default folder is
``/var/lib/cluster-ops/slurm-lab-<checkout's hash>`` instead.

A start that fails stops every daemon it started and removes the database it had not finished making, so the
next start begins clean.
Standard library only: it runs before the virtual environment exists.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# A release's root holds Slurm and munge; libffi8: the jobs run the console's Python from the shared folders, and
# its ctypes needs it on the node. The database is this host's (see start_database).
ROOT_PACKAGES = ("slurm-wlm", "slurmctld", "slurmd", "slurmdbd", "slurmrestd", "munge", "slurm-wlm-jwt-plugin",
                 "slurm-client", "libffi8")
HOST_PACKAGES, HOST_COMMANDS = ("mariadb-server", "debootstrap"), ("mariadbd", "mariadb-install-db", "debootstrap")
CLUSTER = "lab"
REST_USER = "slurmrestd-lab"  # slurmrestd refuses root; it runs as this system user
ACCOUNTS = ("research", "vision", "nlp")  # Slurm accounts = the console's tenants
# Unix users of the lab's nodes, each with the accounts Slurm lets them submit to: the console runs its users' jobs
# as them (a console user's cluster login is their username unless an operator sets another).
USERS = (("alice", ("research", "vision")), ("bob", ("vision", "nlp")))
# Two GPU types, two nodes each: a heterogeneous cluster, as Sia schedules.
NODES = (("gpu01", "a100", 4), ("gpu02", "a100", 4), ("gpu03", "v100", 4), ("gpu04", "v100", 4))
START_TIMEOUT = 60.0
SHARED_LABS = Path("/var/lib/cluster-ops")  # where a lab goes when the checkout is closed to other users
DATABASE_READY = ".lab-ready"  # written into the MariaDB folder once it is made and its users granted
ROOTS = Path(os.environ.get("SLURM_LAB_ROOTS", "/var/cache/cluster-ops"))  # the releases' roots, one per machine
ROOT_READY = ".cluster-ops-root"  # written into a root once every package is in; it names the Slurm version
MIRROR = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
# What a release's root shares with this host (besides /proc and /dev): the lab's folder, the checkout and the
# Python the console runs, at their own paths — a real cluster's shared home and project folders.
SHARED_ON_NODES = (REPO, Path(sys.base_prefix), Path(sys.prefix))
# The Slurm commands a release's root offers through bin/ in the lab's folder.
CLIENT_COMMANDS = ("sinfo", "squeue", "sacct", "sacctmgr", "scontrol", "sbatch", "scancel", "srun", "sprio", "sshare",
                   "sdiag", "sstat")


@dataclass(frozen=True)
class Release:
    """A Slurm release the lab runs: a Debian suite's packages, in a root of their own."""

    name: str
    suite: str
    rest_plugins: str  # slurmrestd's -s
    cgroup_conf: str = ""  # what its slurmd needs in cgroup.conf to start without cgroups; "": no file

    @property
    def root(self) -> Path:
        return ROOTS / f"slurm-{self.name}-{self.suite}"


RELEASES = {
    # Debian 13: REST v0.0.40–v0.0.42. Its slurmd starts a cgroup plugin even for task/none; the lab confines nothing.
    "24.11": Release("24.11", "trixie", "openapi/slurmctld,openapi/slurmdbd", cgroup_conf="CgroupPlugin=disabled\n"),
    "22.05": Release("22.05", "bookworm", "openapi/v0.0.38,openapi/dbv0.0.38"),  # Debian 12: REST v0.0.38
}
DEFAULT_RELEASE = "24.11"  # the newest that runs here


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


def release_named(name: str | None) -> Release:
    if (name or DEFAULT_RELEASE) not in RELEASES:
        sys.exit(f"SLURM_LAB_RELEASE must be one of {', '.join(RELEASES)}, not {name!r}")
    return RELEASES[name or DEFAULT_RELEASE]


@dataclass(frozen=True)
class Lab:
    root: Path
    port: int
    release: Release = RELEASES[DEFAULT_RELEASE]

    @classmethod
    def from_environment(cls) -> Lab:
        return cls(lab_root(os.environ.get("SLURM_LAB_DIR")), int(os.environ.get("SLURM_LAB_PORT", "16817")),
                   release_named(os.environ.get("SLURM_LAB_RELEASE")))

    def as_started(self) -> Lab:
        """This lab with the release its folder was last started with (``start`` records it)."""
        recorded = self.path("run", "release")
        name = recorded.read_text().strip() if recorded.exists() else ""
        return dataclasses.replace(self, release=RELEASES[name]) if name in RELEASES else self

    def command(self, args: list[str]) -> list[str]:
        """``args`` as this lab's release runs them: in its root when it has one."""
        # In the root, its own programs come first: not the lab's bin/, which would chroot again.
        return ["chroot", str(self.release.root), "/usr/bin/env", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", *args]

    def run(self, args: list[str], **options) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(args), env=slurm_env(self), **options)

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

    def demo_owners(self) -> dict[str, str]:
        """The lab's users own the example jobs when they can run the console's Python on the nodes (see
        ``start``), else the jobs run as the console's own Slurm user."""
        marker = self.path("run", "users-run-python")
        return {"SLURM_DEMO_OWNERS": ",".join(user for user, _ in USERS)} if marker.exists() else {}

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    @property
    def database(self) -> Path:
        """MariaDB's folder: one per release, since a slurmdbd converts the accounting tables to its own version."""
        return self.path(f"mariadb-{self.release.name}")

    @property
    def slurm_conf(self) -> Path:
        return self.path("etc", "slurm.conf")

    @property
    def jwt_key(self) -> Path:
        return self.path("etc", "jwt_hs256.key")

    @property
    def script_dir(self) -> Path:
        return self.path("jobs")

    @property
    def bin(self) -> Path:
        """The folder of this release's Slurm commands."""
        return self.path("bin")

    def environment(self) -> dict[str, str]:
        """What the console and the Slurm commands need to reach this lab."""
        return {
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "CLUSTER_BACKEND": "slurm",
            "SLURM_CONF": str(self.slurm_conf),
            "SLURM_REST_URL": f"http://127.0.0.1:{self.rest_port}",
            "SLURM_USER": "root",
            "SLURM_JWT_FILE": str(self.path("etc", "console.jwt")),
            "SLURM_SCRIPT_DIR": str(self.script_dir),
            "SLURM_DEMO_JOBS": "6",  # `make run` submits six example jobs to the empty lab
            **self.demo_owners(),
        }


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "start"
    lab = Lab.from_environment()
    if command != "start":  # the release the lab in that folder was started with, whatever SLURM_LAB_RELEASE says
        lab = lab.as_started()
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
    install_packages(HOST_PACKAGES, HOST_COMMANDS)
    build_root(lab.release)
    stop(lab.as_started(), quiet=True)  # whichever release ran in this folder before
    if not enterable_by_all(lab.root.parent):
        sys.exit(f"Slurm lab: {lab.root.parent} is closed to other users (a folder on its way lacks o+x); MariaDB "
                 "and slurmrestd run as their own users and must enter it: choose another SLURM_LAB_DIR")
    started = time.monotonic()
    try:
        start_daemons(lab)
    except BaseException:
        # Nothing half-started or half-made is left for the next start to trip over.
        stop(lab, quiet=True)
        remove_unfinished_database(lab)
        raise
    print(f"# Slurm {lab.release.name} lab started in {time.monotonic() - started:.1f} s", file=sys.stderr)
    print_environment(lab)


def start_daemons(lab: Lab) -> None:
    write_files(lab)
    lab.path("run", "release").write_text(f"{lab.release.name}\n")
    (labs_of(lab.release) / str(lab.port)).write_text(f"{lab.root}\n")
    for name in ("hosts", "hostname"):  # the root's programs name this host as its own programs do
        shutil.copyfile(Path("/etc", name), lab.release.root / "etc" / name)
    mount_shared(lab)
    write_commands(lab)
    start_munge(lab)
    start_database(lab)
    # slurmdbd reads slurmdbd.conf beside SLURM_CONF.
    start_daemon(lab, "slurmdbd", ["slurmdbd", "-D"], {"SLURM_CONF": str(lab.slurm_conf)}, port=lab.dbd_port)
    start_controller(lab)
    add_associations(lab)
    for number, (name, _, _) in enumerate(NODES):
        start_daemon(lab, f"slurmd-{name}", ["slurmd", "-D", "-N", name, "-f", str(lab.slurm_conf)], {},
                     port=lab.node_port(number))
    wait_for_nodes(lab)
    start_rest(lab)
    write_token(lab)
    # The example jobs run the checkout's .venv, whose python is this Python's interpreter.
    example = REPO / "examples" / "elastic_train.py"
    if users_can_run(lab, Path(sys.executable).resolve()) and users_can_read(lab, example):
        lab.path("run", "users-run-python").write_text("yes\n")
    else:
        lab.path("run", "users-run-python").unlink(missing_ok=True)
        print(f"# Slurm lab: its users cannot reach {REPO}'s Python from the nodes (a folder on the way is closed "
              "to them): the example jobs will run as the console's own Slurm user", file=sys.stderr)


def start_controller(lab: Lab) -> None:
    """slurmctld, recovering its state (jobs included) from StateSaveLocation."""
    start_daemon(lab, "slurmctld", ["slurmctld", "-D", "-f", str(lab.slurm_conf)], {}, port=lab.ctld_port)


def stop_controller(lab: Lab) -> None:
    _terminate(int(lab.path("run", "slurmctld.lab-pid").read_text()))


def print_environment(lab: Lab) -> None:
    for name, value in lab.environment().items():
        print(f"export PATH={lab.bin}:\"$PATH\"" if name == "PATH" else f"export {name}={value}")


def build_root(release: Release) -> None:
    """Debian's ``release.suite`` with its Slurm and munge, in ``release.root``: made once per machine
    (about a minute and 800 MB), in a folder beside it that is renamed only when complete."""
    root = release.root
    if (root / ROOT_READY).exists():
        add_missing_packages(root)
        return
    if os.geteuid() != 0:
        sys.exit(f"Slurm {release.name}'s root {root} is not made yet; make it as root (sudo make slurm-lab)")
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two labs starting at once make it once
        if (root / ROOT_READY).exists():
            return
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if not shutil.which("debootstrap"):
            subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "debootstrap"], check=True, env=env,
                           stdout=subprocess.DEVNULL)
        partial = root.parent / f"{root.name}.partial"
        remove_root(partial)
        started = time.monotonic()
        try:
            subprocess.run(["debootstrap", "--variant=minbase", "--arch=amd64", release.suite, str(partial), MIRROR],
                           check=True, env=env, stdout=subprocess.DEVNULL)
            subprocess.run(["chroot", str(partial), "apt-get", "install", "-y", "-q", "--no-install-recommends",
                            *ROOT_PACKAGES], check=True, env=env, stdout=subprocess.DEVNULL)
            version = subprocess.run(["chroot", str(partial), "dpkg-query", "-W", "-f=${Version}", "slurmctld"],
                                     check=True, capture_output=True, text=True).stdout.strip()
            if not version.startswith(release.name + "."):
                sys.exit(f"Debian {release.suite} now ships Slurm {version}, not {release.name}: the lab's release "
                         "list needs updating")
            (partial / ROOT_READY).write_text(f"slurm {version}\nmade in {time.monotonic() - started:.0f} s\n")
        except subprocess.CalledProcessError as error:
            remove_root(partial)
            sys.exit(f"Slurm {release.name}'s root could not be made: {' '.join(map(str, error.cmd[:3]))} … exited "
                     f"{error.returncode} (it needs {MIRROR}, or DEBIAN_MIRROR set to a mirror of Debian "
                     f"{release.suite})")
        except BaseException:
            remove_root(partial)
            raise
        partial.rename(root)
    print(f"# Slurm {release.name}'s root made in {root} ({version})", file=sys.stderr)


def add_missing_packages(root: Path) -> None:
    """A root made before a package joined ``ROOT_PACKAGES`` gets it now."""
    listed = subprocess.run(["chroot", str(root), "dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\\n"],
                            capture_output=True, text=True).stdout.split("\n")
    installed = {line.split()[0] for line in listed if line.endswith(" installed")}
    missing = [package for package in ROOT_PACKAGES if package not in installed]
    if missing:
        subprocess.run(["chroot", str(root), "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
                       check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), stdout=subprocess.DEVNULL)


def mounted_under(folder: Path) -> list[Path]:
    """Mount points at or below ``folder``, deepest first."""
    points = [Path(line.split()[1].replace("\\040", " ")) for line in Path("/proc/mounts").read_text().splitlines()]
    inside = [point for point in points if point == folder or folder in point.parents]
    return sorted(inside, key=lambda point: len(point.parts), reverse=True)


def remove_root(folder: Path) -> None:
    """Remove a root, after unmounting whatever is mounted in it: never through a mount into this host's files."""
    for point in mounted_under(folder):
        subprocess.run(["umount", "--lazy", str(point)], check=False)
    if mounted_under(folder):
        sys.exit(f"Slurm lab: {folder} still has folders of this host mounted in it; not removed")
    shutil.rmtree(folder, ignore_errors=True)


def mount_shared(lab: Lab) -> None:
    """Mount /proc, /dev and the shared folders (``SHARED_ON_NODES`` and the lab's own) into the release's root,
    each at its own path; ``stop`` unmounts them."""
    root = lab.release.root
    scratch = root / "tmp"
    if not others_running(lab) and not mounted_under(scratch):  # the root's /tmp, as a reboot leaves it: empty
        for entry in scratch.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    # The kernel's own folders replace the root's; slurmd reads the hardware in /sys.
    wanted = [(Path("/proc"), "proc"), (Path("/dev"), "system"), (Path("/sys"), "system")]
    candidates = {folder.resolve() for folder in (*SHARED_ON_NODES, Path(tempfile.gettempdir()), lab.root)}
    wanted += [(folder, "shared") for folder in sorted(candidates, key=lambda folder: len(folder.parts))]
    shared: list[Path] = []
    for folder, kind in wanted:
        target = root / folder.relative_to("/")
        if kind == "shared" and (not folder.is_dir() or any(other in folder.parents for other in shared)):
            continue  # inside a folder already shared
        if target in mounted_under(target):  # a lab of this release already runs (another port)
            shared.append(folder)
            continue
        if kind == "shared" and holds_files(target):
            # It would hide the root's own files (a Python under /usr, say): the nodes do without it.
            print(f"# Slurm lab: {folder} is not shared with the nodes: the root has its own", file=sys.stderr)
            continue
        target.mkdir(parents=True, exist_ok=True)
        if kind == "shared":  # the folders on its way in the root are the lab's own: open them to the jobs' users
            for parent in target.parents:
                if parent == root:
                    break
                parent.chmod(parent.stat().st_mode | 0o005)
        # /dev and /sys with what is mounted under them (/dev/pts, the cgroup folders slurmd reads).
        options = {"proc": ["-t", "proc", "proc"], "system": ["--rbind", str(folder)]}.get(kind,
                                                                                         ["--bind", str(folder)])
        subprocess.run(["mount", *options, str(target)], check=True)
        shared.append(folder)


def holds_files(folder: Path) -> bool:
    """Whether anything but empty folders (mount points of earlier labs) lies under ``folder``."""
    return any(files for _, _, files in os.walk(folder))


def unmount_shared(lab: Lab) -> None:
    """Unmount whatever is mounted in the release's root (the last lab of that root is stopping)."""
    for point in mounted_under(lab.release.root):
        subprocess.run(["umount", "--lazy", str(point)], check=False, stderr=subprocess.DEVNULL)


def write_commands(lab: Lab) -> None:
    """bin/<command> for each Slurm command: that release's own, run in its root from the caller's folder."""
    folder = lab.path("bin")
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)
    for name in CLIENT_COMMANDS:
        wrapper = folder / name
        wrapper.write_text(f"""#!/bin/sh
# Slurm {lab.release.name}'s {name}, from its root (written by scripts/slurm_lab.py)
exec chroot {lab.release.root} /bin/sh -c 'cd "$0" 2>/dev/null || cd /; exec /usr/bin/{name} "$@"' "$PWD" "$@"
""")
        wrapper.chmod(0o755)


def install_packages(packages: tuple[str, ...], commands: tuple[str, ...]) -> None:
    """This host's Debian ``packages``, unless every one of ``commands`` is already here."""
    if all(shutil.which(command) or Path("/usr/sbin", command).exists() for command in commands):
        return
    if os.geteuid() != 0:
        sys.exit("Not installed; as root: apt-get install -y --no-install-recommends " + " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], check=True, env=env,
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
    cgroup_conf = lab.path("etc", "cgroup.conf")
    if lab.release.cgroup_conf:
        cgroup_conf.write_text(lab.release.cgroup_conf)
    else:  # another release's, from an earlier start in this folder
        cgroup_conf.unlink(missing_ok=True)
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
PriorityWeightFairshare=10000
PriorityWeightAge=1000
MaxJobCount=50000
MaxArraySize=10001
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


def start_munge(lab: Lab) -> None:
    """The root's munged, on the root's default socket with the root's own key: one for every lab running from
    that root (Slurm 22.05's slurmctld reaches slurmdbd through the default socket whatever AuthInfo says), started
    by the first lab and stopped by the last (``stop``)."""
    if munge_answers(lab):
        return
    lab.run(["install", "-d", "-o", "munge", "-g", "munge", "-m", "0755", "/run/munge"], check=True)
    with open(lab.path("log", "munged.out"), "ab") as log:
        process = subprocess.Popen(lab.command(["runuser", "-u", "munge", "--", "munged", "--foreground", "--force"]),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    munged_pid_file(lab.release).write_text(str(process.pid))
    wait_until(lambda: munge_answers(lab), "munged answering", failed=lambda: process.poll() is not None,
               log=lab.path("log", "munged.out"))


def munge_answers(lab: Lab) -> bool:
    return lab.run(["sh", "-c", "munge -n | unmunge"], capture_output=True).returncode == 0


def munged_pid_file(release: Release) -> Path:
    return release.root / "run" / "cluster-ops-munged.pid"


def labs_of(release: Release) -> Path:
    """One file per lab running from ``release``'s root (named by its port, holding its folder)."""
    folder = release.root / "run" / "cluster-ops-labs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def others_running(lab: Lab) -> bool:
    """Whether another lab still runs from this lab's root (one of its daemons is alive)."""
    for entry in labs_of(lab.release).iterdir():
        other = Path(entry.read_text().strip())
        if other == lab.root:
            continue
        if any(_alive(int(pid_file.read_text() or 0)) for pid_file in (other / "run").glob("*.lab-pid")):
            return True
        entry.unlink()  # a lab that stopped without saying so
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return pid > 0


def remove_unfinished_database(lab: Lab) -> None:
    data = lab.database
    if data.exists() and not (data / DATABASE_READY).exists():
        shutil.rmtree(data, ignore_errors=True)


def start_database(lab: Lab) -> None:
    """This host's MariaDB on the lab's port, whatever the release: slurmdbd reaches it over TCP, as it reaches a
    database server of its own. (Debian 13's MariaDB 11.8 answers Slurm 24.11's first query with client error
    5027, so the root does not run its own.)"""
    data = lab.database
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
                                   f"--pid-file={data / 'mariadbd.pid'}", "--skip-log-bin"], {}, port=lab.db_port,
                 in_root=False)
    if fresh:
        sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'lab';"
               "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'lab';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
        subprocess.run(["mariadb", f"--socket={data / 'mysqld.sock'}", "-e", sql], check=True)
        (data / DATABASE_READY).write_text("made and granted\n")


def start_daemon(lab: Lab, name: str, command: list[str], env: dict[str, str], port: int | None = None,
                 user: str | None = None, in_root: bool = True) -> None:
    """Start ``command`` in the foreground mode of its daemon, in its own session, logging to log/<name>.out; in
    the release's root unless ``in_root`` is false."""
    if port is not None and port_open(port):  # else another program's answer would pass for the daemon's
        raise SystemExit(f"Slurm lab: port {port} (for {name}) is taken by another program; choose another "
                         "SLURM_LAB_PORT")
    prefix = ["runuser", "-u", user, "--"] if user else []
    with open(lab.path("log", f"{name}.out"), "ab") as log:
        process = subprocess.Popen(lab.command(prefix + command) if in_root else prefix + command, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ, **env),
                                   cwd=lab.root)
    lab.path("run", f"{name}.lab-pid").write_text(str(process.pid))
    if port is not None:
        wait_until(lambda: process.poll() is None and port_open(port), f"{name} on port {port}",
                   failed=lambda: process.poll() is not None, log=lab.path("log", f"{name}.out"))


def add_associations(lab: Lab) -> None:
    def sacctmgr(*args: str) -> None:
        lab.run(["sacctmgr", "-i", *args], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    wait_until(lambda: lab.run(["sacctmgr", "-n", "list", "cluster"], capture_output=True).returncode == 0,
               "slurmdbd answering")
    sacctmgr("add", "cluster", CLUSTER)
    for account in ACCOUNTS:
        sacctmgr("add", "account", account, f"cluster={CLUSTER}", f"Description={account}", "Organization=lab")
    sacctmgr("add", "user", "root", f"account={','.join(ACCOUNTS)}", f"cluster={CLUSTER}")
    sacctmgr("modify", "user", "root", "set", f"DefaultAccount={ACCOUNTS[0]}")
    for user, accounts in USERS:
        add_user(lab, user)
        sacctmgr("add", "user", user, f"account={','.join(accounts)}", f"cluster={CLUSTER}")
        sacctmgr("modify", "user", user, "set", f"DefaultAccount={accounts[0]}")


def add_user(lab: Lab, name: str) -> None:
    """A Unix user of this host, and of the release's root under the same uid and gid (the nodes and the console
    must agree on who owns a job's files)."""
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
                       check=True)
    entry = pwd.getpwnam(name)
    if lab.run(["id", name], capture_output=True).returncode != 0:
        lab.run(["groupadd", "--gid", str(entry.pw_gid), name], check=False, capture_output=True)
        lab.run(["useradd", "--no-create-home", "--uid", str(entry.pw_uid), "--gid", str(entry.pw_gid), "--shell",
                 "/usr/sbin/nologin", name], check=True)


def users_can_run(lab: Lab, program: Path, test: str = "-x") -> bool:
    """Whether every lab user can run ``program`` on the nodes (folders on its way closed to them: not)."""
    return all(lab.run(["runuser", "-u", user, "--", "test", test, str(program)], capture_output=True).returncode == 0
               for user, _ in USERS)


def users_can_read(lab: Lab, path: Path) -> bool:
    return users_can_run(lab, path, "-r")


def wait_for_nodes(lab: Lab) -> None:
    def all_idle() -> bool:
        out = lab.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return len(states) == len(NODES) and all(state == "idle" for state in states.values())

    wait_until(all_idle, "every slurmd idle", log=lab.path("log", "slurmctld.log"))


def start_rest(lab: Lab) -> None:
    if lab.run(["id", REST_USER], capture_output=True).returncode != 0:
        lab.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", REST_USER], check=True)
    env = {"SLURM_CONF": str(lab.slurm_conf), "SLURM_JWT": "daemon"}
    start_daemon(lab, "slurmrestd", ["slurmrestd", "-a", "rest_auth/jwt", "-s", lab.release.rest_plugins,
                                     f"127.0.0.1:{lab.rest_port}"], env, port=lab.rest_port, user=REST_USER)


def write_token(lab: Lab, lifespan: int = 7 * 24 * 3600) -> None:
    out = lab.run(["scontrol", "token", "username=root", f"lifespan={lifespan}"], capture_output=True, text=True,
                  check=True).stdout
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
    if lab.release.root.exists():
        if not others_running(lab):  # the last lab of its root: munged and the mounts go
            munged = munged_pid_file(lab.release)
            if munged.exists():
                _terminate(int(munged.read_text() or 0))
                munged.unlink()
            unmount_shared(lab)
        (labs_of(lab.release) / str(lab.port)).unlink(missing_ok=True)
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
    """This environment, pointed at the lab: its configuration, and its release's commands first on PATH."""
    return dict(os.environ, PATH=lab.environment()["PATH"], SLURM_CONF=str(lab.slurm_conf))


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_until(ready, what: str, failed=lambda: False, log: Path | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    outcome = f"after {START_TIMEOUT:.0f} s"
    while time.monotonic() < deadline:
        if ready():
            return
        if failed():
            outcome = "(it exited)"
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    raise SystemExit(f"Slurm lab: no {what} {outcome}\n{tail}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
