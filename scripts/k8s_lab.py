"""A throwaway Kubernetes on this one host: `make k8s-lab` / `make k8s-lab-stop`, and the Kubernetes tests.

    python scripts/k8s_lab.py start   # prints `export NAME=value` lines for the console
    python scripts/k8s_lab.py stop    # stops every process it started
    python scripts/k8s_lab.py env     # prints the settings again

etcd, kube-apiserver, kube-controller-manager (its Job controller makes the pods, its node lifecycle controller
taints the nodes that stop answering) and kube-scheduler, on loopback, with certificates the lab makes (openssl)
and RBAC on; then the lab's kubelet (``scripts/k8s-lab/kubelet.py``), which registers four GPU nodes of two types
and runs each pod bound to them as a local process. The console gets a ServiceAccount bound to the least
ClusterRole it needs (``CONSOLE_RULES``) and a kubeconfig with its token; the lab and the tests use an
administrator's kubeconfig.

Kubernetes' own programs are built from the Go module proxy, once per machine, into ``K8S_LAB_CACHE`` (default
``/var/cache/cluster-ops``): kube-apiserver, kube-controller-manager and kube-scheduler from ``k8s.io/kubernetes``
v1.37.2 with every staging module pinned at v0.37.2 (``scripts/k8s-lab/kubernetes/go.mod``; ``k8s.io/kubernetes``
cannot be ``go install``ed), and a ten-line etcd on ``go.etcd.io/etcd/server/v3/embed`` v3.7.3
(``scripts/k8s-lab/etcd``). A build is kept under a name that hashes its sources, so changed pins build anew.

With ``K8S_LAB_KUEUE=1`` (the tests' lab has it) the lab also runs Kueue v0.17.0's controller (``sigs.k8s.io/kueue``,
built alike from ``scripts/k8s-lab/kueue``) with its CRDs, managing ``batch/v1`` Jobs labelled with a
``kueue.x-k8s.io/queue-name``. Its webhooks are not registered, so such a Job is created suspended, as Kueue's
defaulting webhook would make it.

Everything lives in one folder (``K8S_LAB_DIR``, default ``var/k8s-lab``) on ports from ``K8S_LAB_PORT`` (default
16443: the API server; etcd the two above). A start that fails stops what it started.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "scripts" / "k8s-lab"
KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.3"
PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KUEUE_NAMESPACE = "kueue-system"
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")  # Kueue's own fixed path (cmd/kueue/main.go)
CACHE = Path(os.environ.get("K8S_LAB_CACHE", "/var/cache/cluster-ops"))
START_TIMEOUT = 90.0
STOP_GRACE = 10.0
CONSOLE_NAMESPACE = "cluster-ops"  # where the console's ServiceAccount lives
CONSOLE_ACCOUNT = "cluster-ops-console"
NOT_A_TENANT = "cluster-ops.io/tenant"  # a namespace labelled "false" is no tenant of the console (its own)
TENANTS = ("research", "vision", "nlp")  # namespaces, as the Slurm lab's accounts
# Two GPU types, two nodes each, as the Slurm lab; products as NVIDIA's GPU feature discovery names them.
NODES = (("gpu01", "NVIDIA-A100-SXM4-40GB"), ("gpu02", "NVIDIA-A100-SXM4-40GB"),
         ("gpu03", "Tesla-V100-SXM2-16GB"), ("gpu04", "Tesla-V100-SXM2-16GB"))
GPUS_PER_NODE = 4
TOKEN_SECONDS = 7 * 24 * 3600
# What the console may do, and no more: read the cluster's nodes, namespaces, pods, events and Kueue's
# workloads; keep its Jobs (create suspended, patch to suspend, resize and resume, delete on cancel) and the
# headless Service that names each Job's pods (deleted with its Job, which owns it); release its accounting
# finalizer from the pods of a deleted Job.
CONSOLE_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "namespaces", "events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},  # patch: its finalizer
    {"apiGroups": ["batch"], "resources": ["jobs"],
     "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "create"]},  # a Job's pods' DNS names
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
]


@dataclass(frozen=True)
class Lab:
    root: Path
    port: int
    kueue: bool = False  # also run Kueue's controller

    @classmethod
    def from_environment(cls) -> Lab:
        root = Path(os.environ.get("K8S_LAB_DIR") or REPO / "var" / "k8s-lab").resolve()
        return cls(root, int(os.environ.get("K8S_LAB_PORT") or 16443), os.environ.get("K8S_LAB_KUEUE") == "1")

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    @property
    def etcd_port(self) -> int:
        return self.port + 1

    @property
    def kueue_ports(self) -> tuple[int, int]:
        """Kueue's webhook server and health probes (etcd has the two ports above the API server's)."""
        return self.port + 3, self.port + 4

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.path("console.kubeconfig")), "CLUSTER_BACKEND": "kubernetes",
                "K8S_LAB_ADMIN_KUBECONFIG": str(self.path("admin.kubeconfig")), "KUBERNETES_DEMO_JOBS": "6"}


# --- building Kubernetes' programs, once per machine -------------------------------------------------------------


def source_hash(folder: Path, *flags: str) -> str:
    digest = hashlib.sha256("\0".join(flags).encode())
    for name in sorted(path.name for path in folder.iterdir() if path.is_file()):
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()[:12]


def build_folder(kind: str) -> Path:
    return CACHE / f"{kind}-{source_hash(SOURCES / kind, *link_flags(kind))}"


def link_flags(kind: str) -> list[str]:
    """Stripped programs; Kubernetes' report their release (as its own build does: ``hack/lib/version.sh``), which
    clients such as Kueue read — unset, the API server says v0.0.0-master."""
    flags = ["-s", "-w"]
    if kind == "kubernetes":
        major, minor = KUBERNETES_VERSION.removeprefix("v").split(".")[:2]
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [f"-X {package}.{name}={value}" for name, value in (
                ("gitVersion", KUBERNETES_VERSION), ("gitMajor", major), ("gitMinor", minor),
                ("gitTreeState", "clean"))]
    return flags


def go_environment(folder: Path) -> dict[str, str]:
    """Go's settings for a build in ``folder``: the modules kept beside every build, the compiler's cache in the
    folder (gigabytes, removed once the programs are built)."""
    return dict(os.environ, GOPATH=str(CACHE / "go"), GOMODCACHE=str(CACHE / "go" / "pkg" / "mod"),
                GOCACHE=str(folder / "go-build"), GOFLAGS="-mod=mod", CGO_ENABLED="0", GOTOOLCHAIN="local")


def built(kind: str, programs: tuple[str, ...]) -> Path:
    """The folder holding ``programs`` built from ``scripts/k8s-lab/<kind>``; built first when missing (under a
    lock: two labs starting at once build once)."""
    folder = build_folder(kind)
    ready = folder / ".built"
    if ready.exists():
        return folder / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return folder / "bin"
        if shutil.which("go") is None:
            raise SystemExit("Kubernetes lab: `go` is not installed (Go ≥ 1.26 builds Kubernetes' programs)")
        for source in (SOURCES / kind).iterdir():
            if source.is_file():
                shutil.copyfile(source, folder / source.name)
        started = time.monotonic()
        for program in programs:
            target = {"kubernetes": f"k8s.io/kubernetes/cmd/{program}", "kueue": "sigs.k8s.io/kueue/cmd/kueue"}.get(
                kind, ".")
            print(f"# Kubernetes lab: building {program} (once per machine; minutes)", file=sys.stderr)
            with open(folder / "build.log", "ab") as log:
                done = subprocess.run(["go", "build", "-trimpath", f"-ldflags={' '.join(link_flags(kind))}", "-o",
                                       f"bin/{program}", target],
                                      cwd=folder, env=go_environment(folder), stdout=log, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                tail = (folder / "build.log").read_text(errors="replace")[-1500:]
                raise SystemExit(f"Kubernetes lab: building {program} failed (exit {done.returncode}); "
                                 f"{folder / 'build.log'} ends:\n{tail}")
        if kind == "kueue":
            copy_kueue_crds(folder)
        ready.write_text(f"built in {time.monotonic() - started:.0f} s\n")
        shutil.rmtree(folder / "go-build", ignore_errors=True)
    return folder / "bin"


def copy_kueue_crds(folder: Path) -> None:
    """Kueue's CustomResourceDefinitions, from the module just built, beside its program."""
    found = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue"], cwd=folder, check=True,
                           env=go_environment(folder), capture_output=True, text=True).stdout.strip()
    (folder / "bin" / "crds").mkdir(parents=True, exist_ok=True)
    for crd in (Path(found) / "config" / "components" / "crd" / "bases").glob("*.yaml"):
        shutil.copyfile(crd, folder / "bin" / "crds" / crd.name)


def programs(kueue: bool = True) -> dict[str, Path]:
    kubernetes = built("kubernetes", PROGRAMS)
    etcd = built("etcd", ("etcd",))
    found = {**{name: kubernetes / name for name in PROGRAMS}, "etcd": etcd / "etcd"}
    return {**found, "kueue": built("kueue", ("kueue",)) / "kueue"} if kueue else found


# --- certificates and kubeconfigs --------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(lab: Lab) -> None:
    """A CA, the API server's serving certificate (127.0.0.1, localhost), the service-account signing key and
    client certificates for the lab's administrator and Kubernetes' own controllers."""
    pki = lab.path("pki")
    pki.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.crt", "-days", "3650", "-subj", "/CN=cluster-ops-lab-ca", cwd=pki)
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=pki)
    openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    certificate(pki, "apiserver", "/CN=kube-apiserver",
                "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc")
    certificate(pki, "admin", "/O=system:masters/CN=lab-admin")
    certificate(pki, "controller-manager", "/CN=system:kube-controller-manager")
    certificate(pki, "scheduler", "/CN=system:kube-scheduler")
    for key in pki.glob("*.key"):
        key.chmod(0o600)


def certificate(pki: Path, name: str, subject: str, extension: str = "") -> None:
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", subject, cwd=pki)
    extra = ["-extfile", f"{name}.ext"] if extension else []
    if extension:
        (pki / f"{name}.ext").write_text(extension + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "3650", *extra, cwd=pki)


def write_kubeconfig(lab: Lab, name: str, user: dict[str, str]) -> Path:
    """A kubeconfig for the lab's server (JSON is YAML) with ``user``'s credentials."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": lab.server,
                                                  "certificate-authority": str(lab.path("pki", "ca.crt"))}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": name}}],
    }
    path = lab.path(f"{name}.kubeconfig")
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


def client_kubeconfig(lab: Lab, name: str) -> Path:
    return write_kubeconfig(lab, name, {"client-certificate": str(lab.path("pki", f"{name}.crt")),
                                        "client-key": str(lab.path("pki", f"{name}.key"))})


# --- the API, as the lab's administrator --------------------------------------------------------------------------


def api(lab: Lab, method: str, path: str, body: object | None = None, ok: tuple[int, ...] = (200, 201)) -> dict:
    """``body``: an object sent as JSON, or bytes sent as YAML (a manifest as published)."""
    context = ssl.create_default_context(cafile=str(lab.path("pki", "ca.crt")))
    context.load_cert_chain(str(lab.path("pki", "admin.crt")), str(lab.path("pki", "admin.key")))
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    kind = "application/yaml" if isinstance(body, bytes) else "application/json"
    request = urllib.request.Request(lab.server + path, method=method, data=data,
                                     headers={"Content-Type": kind, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        if error.code in ok:
            return json.loads(error.read() or b"{}")
        raise


def apply(lab: Lab, path: str, body: dict) -> None:
    """Create ``body`` at ``path`` unless it exists (409)."""
    api(lab, "POST", path, body, ok=(200, 201, 409))


def set_up_console(lab: Lab) -> None:
    """The tenants' namespaces, the console's ServiceAccount and least ClusterRole, and its kubeconfig."""
    apply(lab, "/api/v1/namespaces", {"metadata": {"name": CONSOLE_NAMESPACE, "labels": {NOT_A_TENANT: "false"}}})
    for namespace in TENANTS:
        apply(lab, "/api/v1/namespaces", {"metadata": {"name": namespace}})
    apply(lab, f"/api/v1/namespaces/{CONSOLE_NAMESPACE}/serviceaccounts", {"metadata": {"name": CONSOLE_ACCOUNT}})
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": CONSOLE_ACCOUNT}, "rules": CONSOLE_RULES}
    api(lab, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role, ok=(200, 201, 409))
    apply(lab, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": CONSOLE_ACCOUNT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONSOLE_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": CONSOLE_ACCOUNT, "namespace": CONSOLE_NAMESPACE}]})
    token = api(lab, "POST", f"/api/v1/namespaces/{CONSOLE_NAMESPACE}/serviceaccounts/{CONSOLE_ACCOUNT}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                 "spec": {"expirationSeconds": TOKEN_SECONDS}})["status"]["token"]
    write_kubeconfig(lab, "console", {"token": token})


# --- processes ---------------------------------------------------------------------------------------------------


def start_process(lab: Lab, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
    with open(lab.path("log", f"{name}.log"), "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=dict(os.environ, **(env or {})), cwd=lab.root)
    lab.path("run", f"{name}.pid").write_text(f"{process.pid}\n")


def running(lab: Lab, name: str) -> bool:
    pid = read_pid(lab, name)
    return pid is not None and Path(f"/proc/{pid}").exists() and not is_zombie(pid)


def read_pid(lab: Lab, name: str) -> int | None:
    try:
        return int(lab.path("run", f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None


def is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_until(lab: Lab, ready, what: str, process: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except OSError:
            pass
        if not running(lab, process):
            break
        time.sleep(0.2)
    log = lab.path("log", f"{process}.log")
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise SystemExit(f"Kubernetes lab: no {what} ({process} {'exited' if not running(lab, process) else 'is slow'})"
                     f"\n{tail}")


def server_ready(lab: Lab) -> bool:
    try:
        context = ssl.create_default_context(cafile=str(lab.path("pki", "ca.crt")))
        with urllib.request.urlopen(lab.server + "/readyz", context=context, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


# --- start and stop ----------------------------------------------------------------------------------------------


def start(lab: Lab) -> None:
    if running(lab, "kube-apiserver"):
        print(f"# Kubernetes lab already running in {lab.root}", file=sys.stderr)
        print_environment(lab)
        return
    for port in (lab.port, lab.etcd_port, lab.etcd_port + 1, *(lab.kueue_ports if lab.kueue else ())):
        if port_open(port):
            raise SystemExit(f"Kubernetes lab: port {port} is taken by another program; choose another K8S_LAB_PORT")
    binaries = programs(kueue=lab.kueue)
    started = time.monotonic()
    stop(lab, quiet=True)
    shutil.rmtree(lab.root, ignore_errors=True)
    for folder in ("log", "run", "etcd", "pods"):
        lab.path(folder).mkdir(parents=True, exist_ok=True)
    try:
        start_everything(lab, binaries)
    except BaseException:
        stop(lab, quiet=True)
        raise
    print(f"# Kubernetes lab started in {time.monotonic() - started:.1f} s", file=sys.stderr)
    print_environment(lab)


def start_everything(lab: Lab, binaries: dict[str, Path]) -> None:
    make_certificates(lab)
    pki = lab.path("pki")
    start_process(lab, "etcd", [str(binaries["etcd"]), "--data-dir", str(lab.path("etcd")),
                                "--listen-client-urls", f"http://127.0.0.1:{lab.etcd_port}",
                                "--listen-peer-urls", f"http://127.0.0.1:{lab.etcd_port + 1}"])
    wait_until(lab, lambda: port_open(lab.etcd_port), "etcd answering", "etcd")
    start_process(lab, "kube-apiserver", [
        str(binaries["kube-apiserver"]), f"--etcd-servers=http://127.0.0.1:{lab.etcd_port}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={lab.port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}", "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc", f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-max-token-expiration={TOKEN_SECONDS}s",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--endpoint-reconciler-type=none",  # the advertised 127.0.0.1 is refused as an endpoint
        "--event-ttl=24h",
    ])
    wait_until(lab, lambda: server_ready(lab), "API server ready", "kube-apiserver")
    controller = client_kubeconfig(lab, "controller-manager")
    start_process(lab, "kube-controller-manager", [
        str(binaries["kube-controller-manager"]), f"--kubeconfig={controller}", "--leader-elect=false",
        f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true", "--secure-port=0", "--controllers=*",
        "--node-monitor-grace-period=20s",  # a node that stops answering is NotReady within 20 s
    ])
    scheduler = client_kubeconfig(lab, "scheduler")
    start_process(lab, "kube-scheduler", [str(binaries["kube-scheduler"]), f"--kubeconfig={scheduler}",
                                          "--leader-elect=false", "--secure-port=0"])
    client_kubeconfig(lab, "admin")
    set_up_console(lab)
    start_process(lab, "kubelet", [sys.executable, str(SOURCES / "kubelet.py"), str(lab.path("admin.kubeconfig")),
                                   str(lab.path("pods"))])
    wait_until(lab, lambda: nodes_ready(lab), "lab node Ready", "kubelet")
    wait_until(lab, lambda: default_accounts(lab), "default ServiceAccounts", "kube-controller-manager")
    if lab.kueue:
        start_kueue(lab, binaries["kueue"])


def start_kueue(lab: Lab, program: Path) -> None:
    """Kueue's CRDs, then its controller as the lab's administrator: Jobs only, no leader election, no metrics, no
    visibility API, its webhook server on a certificate the lab signs (no webhook is registered with the API
    server)."""
    for crd in sorted((program.parent / "crds").glob("*.yaml")):
        api(lab, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.read_bytes(),
            ok=(200, 201, 409))
    wait_until(lab, lambda: kueue_crds_established(lab), "Kueue's CRDs established", "kube-apiserver")
    apply(lab, "/api/v1/namespaces", {"metadata": {"name": KUEUE_NAMESPACE, "labels": {NOT_A_TENANT: "false"}}})
    certificates = lab.path("kueue", "certs")
    certificates.mkdir(parents=True, exist_ok=True)
    certificate(lab.path("pki"), "kueue-webhook", "/CN=kueue-webhook", "subjectAltName=IP:127.0.0.1")
    for name, target in (("kueue-webhook.crt", "tls.crt"), ("kueue-webhook.key", "tls.key")):
        shutil.copyfile(lab.path("pki", name), certificates / target)
    place_metrics_certificate(certificates)
    webhook, health = lab.kueue_ports
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": KUEUE_NAMESPACE,
              "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"}, "metrics": {"bindAddress": "0"},
              "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(certificates)},
              "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
              "integrations": {"frameworks": ["batch/job"]}}
    lab.path("kueue", "config.yaml").write_text(json.dumps(config, indent=2) + "\n")  # JSON is YAML
    # Its visibility API server (beta, on by default) wants its own certificate at another fixed path: not needed.
    start_process(lab, "kueue", [str(program), f"--config={lab.path('kueue', 'config.yaml')}",
                                 f"--kubeconfig={lab.path('admin.kubeconfig')}",
                                 "--feature-gates=VisibilityOnDemand=false"])
    wait_until(lab, lambda: kueue_ready(lab), "Kueue ready", "kueue")


def place_metrics_certificate(certificates: Path) -> None:
    """Kueue reads a metrics certificate at a fixed path unless it manages certificates itself (which needs its
    webhooks registered); it serves no metrics here, but will not start without one. Any lab's will do: an
    existing one is left alone."""
    fixed = KUEUE_METRICS_CERTS
    if (fixed / "tls.crt").exists() and (fixed / "tls.key").exists():
        return
    try:
        fixed.mkdir(parents=True, exist_ok=True)
        for name in ("tls.key", "tls.crt"):
            shutil.copyfile(certificates / name, fixed / name)
        (fixed / "tls.key").chmod(0o600)
    except OSError as error:
        raise SystemExit(f"Kubernetes lab: Kueue needs a certificate in {fixed} ({error.strerror}); run the lab "
                         "as root, or without K8S_LAB_KUEUE") from None


def kueue_crds_established(lab: Lab) -> bool:
    crds = api(lab, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").get("items", [])
    kueue = [crd for crd in crds if crd["spec"]["group"] == "kueue.x-k8s.io"]
    return bool(kueue) and all(any(condition["type"] == "Established" and condition["status"] == "True"
                                   for condition in (crd.get("status") or {}).get("conditions") or []) for crd in kueue)


def kueue_ready(lab: Lab) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{lab.kueue_ports[1]}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def nodes_ready(lab: Lab) -> bool:
    nodes = api(lab, "GET", "/api/v1/nodes").get("items", [])
    ready = [node for node in nodes if any(condition["type"] == "Ready" and condition["status"] == "True"
                                           for condition in node.get("status", {}).get("conditions", []))]
    return len(ready) >= len(NODES)


def default_accounts(lab: Lab) -> bool:
    """Pods are admitted in a namespace once its ``default`` ServiceAccount exists (the controller makes it)."""
    return all(api(lab, "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default", ok=(200, 404)).get(
        "metadata") for namespace in TENANTS)


def stop(lab: Lab, quiet: bool = False) -> None:
    """Stop what the lab started, the kubelet first (it stops its pods), etcd last."""
    stopped = []
    for name in ("kubelet", "kueue", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
        pid = read_pid(lab, name)
        if pid is None or not running(lab, name):
            continue
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + STOP_GRACE
        while running(lab, name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if running(lab, name):
            os.killpg(pid, signal.SIGKILL)
        stopped.append(name)
    if not quiet:
        print(f"# Kubernetes lab stopped ({', '.join(stopped) or 'nothing was running'})", file=sys.stderr)


def print_environment(lab: Lab) -> None:
    for name, value in lab.environment().items():
        print(f"export {name}={value}")


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "start"
    lab = Lab.from_environment()
    if command == "start":
        start(lab)
    elif command == "stop":
        stop(lab)
    elif command == "env":
        print_environment(lab)
    elif command == "build":
        print(json.dumps({name: str(path) for name, path in programs().items()}))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
