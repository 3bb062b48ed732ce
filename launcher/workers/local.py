"""Worker "pods" on this machine: one network + mount namespace pair per worker.

Each worker gets what a pod gets and DGL relies on: an IP of its own on a private bridge (a
trainer finds its machine id by matching its interface addresses against ip_config), a
private /dev/shm (DGL's shared-memory names do not include the partition id), and a host name
of its own (``worker-<i>``: MPI tells its nodes apart by name). A holder process (``sleep``,
like a pause container) keeps the namespaces alive; commands enter them with ``nsenter``.
One more namespace on the bridge, ``launcher``, is dglrun's side of the network: mpirun runs
there in DistParMETIS mode and reaches each worker through :meth:`LocalTransport.rsh_agent`.
Nothing routes outside: the bridge has no address on the host and the namespaces have no
default route.

Needs root (network namespaces and veth pairs). Without root, dglrun runs itself again as
"root" of a new unprivileged user namespace with its own network and mount namespaces
(:func:`user_namespace_argv`), where all of this is allowed and nothing touches the host's
network; where the kernel refuses user namespaces too, setup fails with a clear message.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from launcher import programs
from launcher.checksums import manifest
from launcher.workers.hostfile import Host
from launcher.workers.transport import LineSink, PopenProc, Proc, WorkerTransportError, default_sink
from podcontract import DGL_PORT

NETNS_PREFIX = "dglrun-"
REQUIRED_TOOLS = ("ip", "nsenter", "unshare", "mount")


def _sh(*argv: str) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise WorkerTransportError(f"local transport: cannot run {argv[0]}: {e.strerror}") from e
    if out.returncode != 0:
        raise WorkerTransportError(
            f"local transport: `{' '.join(argv)}` failed ({out.returncode}): "
            f"{(out.stderr or out.stdout).strip()}"
        )
    return out.stdout


#: Set in the dglrun that runs inside the user namespace dglrun made for itself.
USERNS_ENV = "DGLRUN_IN_USER_NAMESPACE"
NO_ROOT = (
    "the local transport needs root or unprivileged user namespaces: it creates a network "
    "namespace, a veth pair and a private /dev/shm per worker"
)


def check_prerequisites() -> None:
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        raise WorkerTransportError(
            f"the local transport needs {', '.join(missing)} (Debian: iproute2, util-linux, mount)"
        )
    if os.geteuid() != 0:
        why = user_namespaces_work() or "available, but dglrun was not started through its CLI"
        raise WorkerTransportError(
            f"{NO_ROOT} (user namespaces here: {why}). Run as root (e.g. in CI or a VM), allow "
            "user namespaces (sysctl user.max_user_namespaces), or run the job in a cluster "
            "with the kubectl transport."
        )


def user_namespaces_work() -> str | None:
    """None if this user may create a user namespace (with network and mount namespaces),
    else why not."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    try:
        out = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--net", "--mount", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if out.returncode != 0:
        return out.stderr.strip() or f"unshare exited with code {out.returncode}"
    return None


def user_namespace_argv(argv: list[str]) -> list[str]:
    """``argv`` run as "root" of a new user namespace with its own network and mount
    namespaces; /run is a private tmpfs there (``ip netns`` keeps its namespaces in
    /run/netns). A SIGTERM to ``unshare`` reaches the command (it stops its workers)."""
    script = 'mount -t tmpfs tmpfs /run && mkdir -p /run/netns && exec "$@"'
    return [
        "unshare", "--user", "--map-root-user", "--net", "--mount", "--propagation", "private",
        "--fork", "--kill-child=SIGTERM", "--", "sh", "-c", script, "sh", *argv,
    ]  # fmt: skip


def _cgroup_mount() -> str:
    """Shell that mounts, in a worker's namespace, the memory cgroup filesystem this machine
    has: ``ip netns exec`` mounts a sysfs of the namespace's own, without it. Best effort (a
    user namespace may not mount it); with it launcher.workers.remote tells a process the kernel
    killed for memory from the cgroup's OOM-kill count, as in a pod."""
    if Path("/sys/fs/cgroup/cgroup.controllers").is_file():  # cgroup v2
        return "mount -t cgroup2 cgroup2 /sys/fs/cgroup"
    if Path("/sys/fs/cgroup/memory/memory.oom_control").is_file():  # cgroup v1
        return (
            "mount -t tmpfs cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/memory && "
            "mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory"
        )
    return "true"


class LocalTransport:
    def __init__(
        self,
        num_workers: int,
        root: Path,
        *,
        sink: LineSink = default_sink,
        shm_size: str = "2g",
        keep: bool = False,
    ) -> None:
        if num_workers < 1:
            raise WorkerTransportError("the local transport needs at least one worker")
        self.num_workers = num_workers
        self.root = root
        self.sink = sink
        self.shm_size = shm_size
        self.keep = keep
        self.run_id = secrets.token_hex(3)
        self.bridge = f"dglbr{self.run_id}"
        self.subnet = f"10.231.{random.randint(1, 254)}"
        self._hosts: list[Host] = []
        self._holders: list[subprocess.Popen[bytes]] = []
        self._netns: list[str] = []
        self._links: list[str] = []
        self._procs: list[Proc] = []
        self._coordinator: subprocess.Popen[bytes] | None = None

    @property
    def coordinator_ip(self) -> str:
        """The launcher namespace's IP on the bridge (what the workers reach)."""
        return f"{self.subnet}.1"

    # -- setup / teardown -----------------------------------------------------------------

    def setup(self) -> list[Host]:
        check_prerequisites()
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self.workers()

    def _setup(self) -> None:
        _sh("ip", "link", "add", "name", self.bridge, "type", "bridge")
        self._links.append(self.bridge)
        _sh("ip", "link", "set", self.bridge, "up")
        for i in range(self.num_workers):
            name = f"worker-{i}"
            ip = f"{self.subnet}.{i + 2}"
            self._holders.append(self._namespace(str(i), ip, name))
            (self.root / name / "dgl_workspace").mkdir(parents=True, exist_ok=True)
            self._hosts.append(Host(ip, DGL_PORT, name, 1))
        self._coordinator = self._namespace("l", self.coordinator_ip, "launcher")

    def _namespace(self, tag: str, ip: str, hostname: str) -> subprocess.Popen[bytes]:
        """A network namespace on the bridge with ``ip``, and its holder process."""
        ns = f"{NETNS_PREFIX}{self.run_id}-{tag}"
        host_if, peer_if = f"dgv{self.run_id}{tag}", f"dgp{self.run_id}{tag}"
        _sh("ip", "netns", "add", ns)
        self._netns.append(ns)
        _sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", peer_if)
        self._links.append(host_if)
        _sh("ip", "link", "set", peer_if, "netns", ns)
        _sh("ip", "link", "set", host_if, "master", self.bridge)
        _sh("ip", "link", "set", host_if, "up")
        in_ns = ("ip", "netns", "exec", ns)
        _sh(*in_ns, "ip", "link", "set", peer_if, "name", "eth0")
        _sh(*in_ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
        _sh(*in_ns, "ip", "link", "set", "eth0", "up")
        _sh(*in_ns, "ip", "link", "set", "lo", "up")
        return self._start_holder(ns, hostname)

    def _start_holder(self, ns: str, hostname: str) -> subprocess.Popen[bytes]:
        # sethostname(2) (the hostname command) works in a user namespace too, where the
        # host's /proc/sys is read-only
        name = (
            f"{{ hostname {hostname} 2>/dev/null || echo {hostname} > /proc/sys/kernel/hostname "
            "2>/dev/null || true; }"
        )
        script = (
            f"mount -t tmpfs -o size={self.shm_size} tmpfs /dev/shm && {name} && "
            f"{{ {_cgroup_mount()} ; }} 2>/dev/null; exec sleep infinity"
        )
        holder = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns,
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                script,
            ],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        host_mnt = os.readlink("/proc/self/ns/mnt")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if holder.poll() is not None:
                err = holder.stderr.read().decode() if holder.stderr else ""
                raise WorkerTransportError(f"local transport: worker namespace {ns} failed: {err}")
            with contextlib.suppress(OSError):
                comm = Path(f"/proc/{holder.pid}/comm").read_text().strip()
                if comm == "sleep" and os.readlink(f"/proc/{holder.pid}/ns/mnt") != host_mnt:
                    return holder
            time.sleep(0.01)
        holder.kill()
        raise WorkerTransportError(
            f"local transport: worker namespace {ns} did not come up in 10 s"
        )

    def release(self) -> None:
        """Nothing to leave running: close() stops everything."""

    def close(self) -> None:
        for proc in self._procs:
            proc.stop()
        for holder in [*self._holders, *([self._coordinator] if self._coordinator else [])]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(holder.pid, 9)
            holder.wait(5)
        self._coordinator = None
        for ns in self._netns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        for link in reversed(self._links):
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30)
        self._procs, self._holders, self._netns, self._links = [], [], [], []
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- Transport ------------------------------------------------------------------------

    def workers(self) -> list[Host]:
        return list(self._hosts)

    def until(self, deadline: float | None) -> None:
        pass  # local copies cannot hang on a network

    def _index(self, worker: Host) -> int:
        return int(worker.name.rsplit("-", 1)[1])

    def workspace(self, worker: Host) -> str:
        return str(self.root / worker.name / "dgl_workspace")

    def _local(self, worker: Host, remote: str) -> Path:
        path = Path(remote)
        base = self.root / worker.name
        if not path.resolve().is_relative_to(base.resolve()):
            raise WorkerTransportError(
                f"{worker.name}: {remote} is outside the worker's filesystem"
            )
        return path

    def copy_to(self, worker: Host, local: Path, remote: str) -> None:
        dst = self._local(worker, remote)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if local.is_dir():
            shutil.copytree(local, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(local, dst)

    def write_file(self, worker: Host, remote: str, content: str) -> None:
        dst = self._local(worker, remote)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(content)

    def manifest(self, worker: Host, remote_dir: str) -> dict[str, tuple[int, str]]:
        return manifest(self._local(worker, remote_dir))

    def fetch(self, worker: Host, remote: str, local: Path) -> bool:
        src = self._local(worker, remote)
        if not src.exists():
            return False
        local.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, local, dirs_exist_ok=True)
        else:
            shutil.copy2(src, local)
        return True

    def exists(self, worker: Host, path: str) -> bool:
        return Path(path).is_file()  # workers share this machine's files, like one image

    def _enter(self, holder: subprocess.Popen[bytes]) -> list[str]:
        # Entering a mount namespace resets the working folder to its root: keep ours, so
        # relative entry points resolve as they would in a pod's workdir.
        return ["nsenter", "-t", str(holder.pid), "-n", "-m", "-u", f"--wd={os.getcwd()}", "--"]

    def start(self, worker: Host, argv: list[str], env: dict[str, str], label: str) -> Proc:
        holder = self._holders[self._index(worker)]
        # In a pod the host name resolves to the pod's IP; here it does not, so point gloo
        # and tensorpipe at the worker's own interface.
        full_env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0", **env}
        # under launcher.workers.remote, which reports the process's peak memory when it ends
        pidfile = self.root / "pids" / (label.replace("/", "-") + ".pid")
        wrap = programs.argv(sys.executable, programs.REMOTE, "run", "--keep-session", "--pidfile")
        argv = [*wrap, str(pidfile), "--", *argv]
        env_ = programs.local_env(full_env)
        proc = PopenProc(label, [*self._enter(holder), *argv], self.sink, env=env_)
        self._procs.append(proc)
        return proc

    def run(self, worker: Host, argv: list[str], timeout: float) -> tuple[int, str]:
        cmd = [*self._enter(self._holders[self._index(worker)]), *argv]
        try:
            out = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as e:
            raise WorkerTransportError(
                f"{worker.name}: {argv[0]} timed out after {timeout:.0f}s"
            ) from e
        except OSError as e:
            raise WorkerTransportError(f"{worker.name}: cannot run {argv[0]}: {e.strerror}") from e
        return out.returncode, out.stdout

    def kill(self, worker: Host, pidfiles: list[str]) -> None:
        from launcher.workers.remote import kill_pidfiles

        kill_pidfiles([Path(p) for p in pidfiles])  # one PID namespace and /tmp for all

    def rsh_agent(self) -> str:
        """A script mpirun runs as ``agent worker-<i> command...``: the command in that
        worker's namespaces (what ``kubexec.sh`` is in a cluster)."""
        agent = self.root / "mpi-rsh-agent.sh"
        cases = "".join(
            f"  {h.name}) pid={self._holders[i].pid} ;;\n" for i, h in enumerate(self._hosts)
        )
        agent.write_text(
            "#!/bin/sh\n"
            'host=$1; shift\ncase "$host" in\n'
            f"{cases}"
            '  *) echo "mpi-rsh-agent: no local worker $host" >&2; exit 1 ;;\nesac\n'
            f'exec nsenter -t "$pid" -n -m -u --wd={shlex.quote(os.getcwd())} -- /bin/sh -c "$*"\n'
        )
        agent.chmod(0o755)
        return str(agent)

    def start_coordinator(
        self, argv: list[str], env: dict[str, str], label: str, sink: LineSink
    ) -> Proc:
        if self._coordinator is None:
            raise WorkerTransportError("local transport: not set up")
        proc = PopenProc(
            label, [*self._enter(self._coordinator), *argv], sink, env={**os.environ, **env}
        )
        self._procs.append(proc)
        return proc
