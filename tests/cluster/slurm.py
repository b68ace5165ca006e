"""A real single-node SLURM cluster (with accounting) living in one temporary directory.

Used by ``tests/test_slurm.py``; also runnable by hand to try the cluster profile on one machine::

    python tests/cluster/slurm.py start /tmp/myslurm     # prints the SLURM_CONF to export
    python tests/cluster/slurm.py stop /tmp/myslurm

It starts, as root and without systemd, the daemons of Debian bookworm's packages (see
``.ci/install_slurm.sh``): ``munged`` (as user munge), ``mariadbd``, ``slurmdbd``, ``slurmctld``
and ``slurmd``. Every piece of state (configuration, munge key and socket, database files, spool
directories, logs, pid files) lives under the given directory and every daemon listens on a free
port of 127.0.0.1, so the cluster does not touch ``/etc/slurm``, ``/run/munge``, the system's
MariaDB or its ports, and two runs in a row start from nothing. Client commands find the cluster
through ``SLURM_CONF`` (see :attr:`SlurmCluster.env`); the one path outside the directory is the
link ``/run/slurm/conf``, made while the cluster runs, for ``srun`` inside jobs (see RUN_LINK).

Accounting runs for real (slurmdbd on MariaDB) because snakemake-executor-plugin-slurm queries job
states with ``sacct`` and the tests check the submitted jobs there.

A step that cannot be done raises :class:`ClusterUnavailable` naming the step, with the failing
command's stderr or the daemon's log, after stopping whatever had been started.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ClusterUnavailable", "SlurmCluster", "EXECUTABLES", "RUN_LINK", "process_alive"]

#: Executables the cluster needs, with the Debian package that ships each.
EXECUTABLES = {
    "munged": "munge", "mungekey": "munge", "munge": "munge", "unmunge": "munge",
    "mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server",
    "mariadb": "mariadb-client", "mariadb-admin": "mariadb-client",
    "slurmdbd": "slurmdbd", "slurmctld": "slurmctld", "slurmd": "slurmd", "slurmstepd": "slurmd",
    "sbatch": "slurm-client", "srun": "slurm-client", "sacct": "slurm-client",
    "sacctmgr": "slurm-client", "sinfo": "slurm-client", "squeue": "slurm-client",
    "scontrol": "slurm-client", "scancel": "slurm-client",
}
# Daemons live in /usr/sbin, which a non-login shell's PATH may lack.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])

CLUSTER_NAME = "scontrast"
PARTITION = "main"
ACCOUNT = "root"  # created with the cluster's root association
MARKER = "SCONTRAST_SLURM_ROOT"  # environment variable naming the cluster directory
# Where a SLURM client without SLURM_CONF looks, in this order (Slurm 22.05). srun inside a job
# is such a client: the snakemake jobstep executor strips every SLURM_* variable, SLURM_CONF
# included, from the environment of the srun it runs. So the cluster links RUN_LINK to its
# configuration while it runs (what a configless slurmd does on a compute node) and cannot run
# where SYSTEM_CONF exists, since that file would win.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
RUN_LINK = Path("/run/slurm/conf")


class ClusterUnavailable(RuntimeError):
    """SLURM cannot run here; the message names the step and carries the evidence."""

    def __init__(self, step: str, detail: str):
        self.step = step
        self.detail = detail.strip()
        super().__init__(f"single-node SLURM unavailable at step '{step}': {self.detail}")


def _tail(path: Path, n: int = 25) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(lines[-n:]) or "(empty log)"


def _free_ports(n: int) -> list[int]:
    """n distinct ports that nothing listens on now (bound together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def process_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class SlurmCluster:
    """One-node SLURM with accounting under ``root``; a context manager (``start`` / ``stop``).

    Parameters
    ----------
    root
        Directory that holds all state; created if missing. It must not be inside a directory the
        munge user cannot enter (pytest's ``tmp_path`` is 0700 root, so use e.g.
        ``tempfile.mkdtemp()``; ``start`` makes ``root`` itself 0755).
    """

    DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")  # start order

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self.conf = self.root / "etc" / "slurm.conf"
        self.dbd_conf = self.root / "etc" / "slurmdbd.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.db_socket = self.root / "mysql" / "mysqld.sock"
        self.log_dir = self.root / "log"
        self.pid_file = self.root / "pids.json"  # what `stop` kills, also from another process
        self.node = socket.gethostname().split(".")[0]
        self.partition = PARTITION
        self.account = ACCOUNT
        self.cluster_name = CLUSTER_NAME
        self._procs: dict[str, subprocess.Popen] = {}
        self._exe: dict[str, str] = {}

    # ------------------------------------------------------------------ public
    @property
    def env(self) -> dict[str, str]:
        """Environment for client commands (sbatch, sacct, snakemake ...) of this cluster."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = _SEARCH_PATH
        env[MARKER] = str(self.root)  # inherited by daemons and jobs: how `stop` recognises them
        return env

    def start(self) -> "SlurmCluster":
        """Check prerequisites, write the configuration and start the daemons; wait until idle."""
        self._check_prerequisites()
        try:
            self._prepare()
            self._start_munge()
            self._start_mariadb()
            self._start_slurmdbd()
            self._start_slurmctld()
            self._start_slurmd()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> list[str]:
        """Cancel jobs, stop every daemon started (by pid, newest first); return what was killed.

        Safe to call twice and from another process (pids are read from ``pids.json``; a pid is
        only signalled while its command line or environment still names this cluster's directory).
        """
        notes: list[str] = []
        pids = self.pids()
        if pids.get("slurmctld") and process_alive(pids["slurmctld"]):
            # Jobs still running would leave slurmstepd processes behind once slurmd is gone.
            deadline = time.time() + 30
            while time.time() < deadline:
                q = self._run(["squeue", "-h", "-o", "%i"], check=False, timeout=10)
                jobs = q.stdout.split()
                if q.returncode != 0 or not jobs:
                    break
                self._run(["scancel", "--quiet", *jobs], check=False, timeout=20)
                notes.append(f"cancelled jobs {' '.join(jobs)}")
                time.sleep(1)
        for name in reversed(self.DAEMONS):
            pid = pids.get(name)
            if pid and self._terminate(name, pid):
                notes.append(f"{name} ({pid})")
        notes += self._sweep_leftovers()
        if RUN_LINK.is_symlink() and Path(os.readlink(RUN_LINK)) == self.conf.parent:
            RUN_LINK.unlink()
            try:
                RUN_LINK.parent.rmdir()
            except OSError:  # not empty: not only ours
                pass
        self._procs.clear()
        if self.pid_file.exists():
            self.pid_file.unlink()
        return notes

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def sacct(self, *args: str) -> subprocess.CompletedProcess:
        """``sacct`` on this cluster (all users, all jobs of the last day)."""
        return self._run(["sacct", "--allusers", "--starttime", "now-1days", *args], timeout=60)

    def squeue(self) -> subprocess.CompletedProcess:
        """``squeue`` on this cluster (all jobs, with state and reason)."""
        return self._run(["squeue", "-o", "%i %j %T %r"], check=False, timeout=30)

    # ------------------------------------------------------------- prerequisites
    def _check_prerequisites(self) -> None:
        if not sys.platform.startswith("linux"):
            raise ClusterUnavailable("prerequisites", f"needs Linux, this is {sys.platform}")
        if os.geteuid() != 0:
            raise ClusterUnavailable("prerequisites",
                                     "must run as root: it starts munged as user munge, and slurmd, "
                                     "which runs jobs as their submitter")
        missing = {}
        for exe, pkg in EXECUTABLES.items():
            path = shutil.which(exe, path=_SEARCH_PATH)
            if path is None:
                missing.setdefault(pkg, []).append(exe)
            else:
                self._exe[exe] = path
        if missing:
            listing = "; ".join(f"{pkg}: {', '.join(exes)}" for pkg, exes in sorted(missing.items()))
            raise ClusterUnavailable("prerequisites",
                                     f"missing executables ({listing}); "
                                     "install them with `bash .ci/install_slurm.sh`")
        try:
            pwd.getpwnam("munge")
        except KeyError:
            raise ClusterUnavailable("prerequisites", "no 'munge' user (the munge package creates it)") from None
        if SYSTEM_CONF.exists():
            raise ClusterUnavailable("prerequisites",
                                     f"{SYSTEM_CONF} exists: srun inside a job (run without SLURM_CONF by the "
                                     "snakemake jobstep executor) would use that cluster, not the test's")
        if RUN_LINK.exists():  # a directory, or a link to one: not a dangling link of ours
            raise ClusterUnavailable("prerequisites",
                                     f"{RUN_LINK} is in use ({os.path.realpath(RUN_LINK)}): another SLURM "
                                     "runs configless here")

    # ------------------------------------------------------------------ helpers
    def _run(self, cmd: list[str], *, check=True, timeout=60, step=None, **kw) -> subprocess.CompletedProcess:
        exe = self._exe.get(cmd[0]) or shutil.which(cmd[0], path=_SEARCH_PATH) or cmd[0]
        try:
            proc = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=timeout,
                                  env=self.env, **kw)
        except (OSError, subprocess.TimeoutExpired) as exc:
            if not check:
                return subprocess.CompletedProcess(cmd, 1, "", str(exc))
            raise ClusterUnavailable(step or cmd[0], f"`{' '.join(cmd)}`: {exc}") from None
        if check and proc.returncode != 0:
            raise ClusterUnavailable(step or cmd[0], f"`{' '.join(cmd)}` exited {proc.returncode}: "
                                                     f"{proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def _spawn(self, name: str, cmd: list[str], *, user: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start a daemon in the foreground of its own session, output to log/<name>.out."""
        out = open(self.log_dir / f"{name}.out", "ab")
        try:
            proc = subprocess.Popen([self._exe[cmd[0]], *cmd[1:]], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env or self.env, start_new_session=True,
                                    user=user, group=user, cwd=self.root)
        except OSError as exc:
            raise ClusterUnavailable(name, f"cannot execute {cmd[0]}: {exc}") from None
        finally:
            out.close()
        self._procs[name] = proc
        pids = self.pids()
        pids[name] = proc.pid
        self.pid_file.write_text(json.dumps(pids))
        return proc

    def pids(self) -> dict[str, int]:
        """Daemon name -> pid of the daemons started (read from ``pids.json``)."""
        try:
            return {k: int(v) for k, v in json.loads(self.pid_file.read_text()).items()}
        except (OSError, ValueError):
            return {name: p.pid for name, p in self._procs.items()}

    def _wait(self, name: str, ready, timeout: float, logs: list[Path]) -> None:
        """Poll ``ready()`` until True; fail early if the daemon died, with its logs."""
        deadline = time.time() + timeout
        last = ""
        while time.time() < deadline:
            proc = self._procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise ClusterUnavailable(name, f"{name} exited with status {proc.returncode}:\n"
                                         + "\n".join(_tail(p) for p in logs))
            ok, last = ready()
            if ok:
                return
            time.sleep(0.3)
        raise ClusterUnavailable(name, f"{name} not ready after {timeout:.0f} s ({last.strip()}):\n"
                                 + "\n".join(_tail(p) for p in logs))

    def _terminate(self, name: str, pid: int) -> bool:
        """SIGTERM, then SIGKILL after 20 s; only while the pid still belongs to this cluster
        (a pid recycled since it was recorded is left alone)."""
        proc = self._procs.get(name)
        if not process_alive(pid) or not self._ours(pid):
            if proc is not None:
                proc.poll()
            return False
        os.kill(pid, signal.SIGTERM)
        for sig_deadline, sig in ((20, signal.SIGKILL), (10, None)):
            deadline = time.time() + sig_deadline
            while time.time() < deadline and process_alive(pid):
                if proc is not None:
                    proc.poll()
                time.sleep(0.1)
            if not process_alive(pid):
                break
            if sig is not None:
                os.kill(pid, sig)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return True

    def _ours(self, pid: int) -> bool:
        """The pid runs with this cluster's directory in its command line or environment."""
        if str(self.root) in _cmdline(pid):
            return True
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"{MARKER}={self.root}".encode() in environ

    def _sweep_leftovers(self) -> list[str]:
        """Kill what is left of this cluster's jobs: slurmstepd and job processes.

        They are recognised by this cluster's marker variable in their environment together with
        a job id (or the slurmstepd command), never by name alone.
        """
        mine = f"{MARKER}={self.root}".encode()
        me = {os.getpid(), os.getppid()}
        killed = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in me:
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            in_job = any(v.startswith(b"SLURM_JOB_ID=") for v in environ)
            stepd = _cmdline(int(entry.name)).startswith("slurmstepd")
            if mine in environ and (in_job or stepd) and process_alive(int(entry.name)):
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(f"leftover {_cmdline(int(entry.name)) or entry.name}")
                except ProcessLookupError:
                    pass
        return killed

    # ------------------------------------------------------------------- steps
    def _prepare(self) -> None:
        for sub in ("etc", "log", "run", "spool/ctld", "spool/d", "mysql", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # munged (user munge) must reach its directory below
        self.ports = dict(zip(("slurmctld", "slurmd", "slurmdbd", "mariadb"), _free_ports(4)))
        self.db_password = secrets.token_hex(12)

        hw = self._run(["slurmd", "-C"], step="slurmd -C").stdout.splitlines()[0].split()
        fields = dict(f.split("=", 1) for f in hw if "=" in f)
        # Leave room for the OS and the daemons; jobs asking for more stay pending, never OOM the host.
        real = int(fields.pop("RealMemory"))
        fields.pop("NodeName", None)
        self.real_memory = max(500, int(real * 0.9))
        node_line = " ".join([f"NodeName={self.node}", "NodeAddr=127.0.0.1",
                              *(f"{k}={v}" for k, v in fields.items() if k != "UpTime"),
                              f"RealMemory={self.real_memory}", "State=UNKNOWN"])
        auth = f"AuthInfo=socket={self.munge_socket}"
        r = self.root
        self.conf.write_text("\n".join([
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            "SlurmUser=root",
            f"SlurmctldPort={self.ports['slurmctld']}",
            f"SlurmdPort={self.ports['slurmd']}",
            "AuthType=auth/munge", "CredType=cred/munge", auth,
            f"StateSaveLocation={r}/spool/ctld",
            f"SlurmdSpoolDir={r}/spool/d",
            f"SlurmctldPidFile={r}/run/slurmctld.pid",
            f"SlurmdPidFile={r}/run/slurmd.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd.log",
            "SlurmctldDebug=info", "SlurmdDebug=info",
            # No cgroups in a container: track processes by parentage, bind nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=task=5",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.ports['slurmdbd']}",
            # Connections to slurmdbd take their munge socket from here, not from AuthInfo.
            f"AccountingStoragePass={self.munge_socket}",
            # The plugin puts rule and wildcards in --comment: keep it in sacct for the tests.
            "AccountingStoreFlags=job_comment",
            "JobCompType=jobcomp/none",
            node_line,
            f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))
        self.dbd_conf.write_text("\n".join([
            "AuthType=auth/munge", auth,
            f"DbdHost={self.node}", "DbdAddr=127.0.0.1", f"DbdPort={self.ports['slurmdbd']}",
            "SlurmUser=root",
            f"PidFile={r}/run/slurmdbd.pid",
            f"LogFile={r}/log/slurmdbd.log",
            "DebugLevel=info",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1", f"StoragePort={self.ports['mariadb']}",
            "StorageUser=slurm", f"StoragePass={self.db_password}", "StorageLoc=slurm_acct_db",
            "",
        ]))
        self.dbd_conf.chmod(0o600)  # slurmdbd refuses a readable file holding the password
        RUN_LINK.parent.mkdir(parents=True, exist_ok=True)
        if RUN_LINK.is_symlink():  # dangling: left by a cluster whose directory is gone
            RUN_LINK.unlink()
        RUN_LINK.symlink_to(self.conf.parent)

    def _start_munge(self) -> None:
        mdir = self.root / "munge"
        key = mdir / "munge.key"
        self._run(["mungekey", "--create", "--keyfile", str(key)], step="munge key")
        munge = pwd.getpwnam("munge")
        for p in (mdir, key):
            os.chown(p, munge.pw_uid, munge.pw_gid)
        mdir.chmod(0o711)  # munged: clients must reach the socket, nobody else lists the key
        key.chmod(0o600)
        self._spawn("munged", ["munged", "--foreground", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={mdir}/munged.pid",
                               f"--log-file={mdir}/munged.log", f"--seed-file={mdir}/munged.seed"],
                    user="munge")

        def ready():
            if not self.munge_socket.exists():
                return False, "no socket yet"
            cred = self._run(["munge", "-n", "-S", str(self.munge_socket)], check=False, timeout=10)
            if cred.returncode != 0:
                return False, cred.stderr
            dec = self._run(["unmunge", "-S", str(self.munge_socket)], check=False, timeout=10,
                            input=cred.stdout)
            return dec.returncode == 0 and "Success" in dec.stdout, dec.stderr + dec.stdout

        self._wait("munged", ready, 20, [self.log_dir / "munged.out", mdir / "munged.log"])

    def _start_mariadb(self) -> None:
        data = self.root / "mysql" / "data"
        common = ["--no-defaults", f"--datadir={data}", "--user=root"]
        self._run(["mariadb-install-db", *common, "--auth-root-authentication-method=socket",
                   "--skip-test-db", "--skip-name-resolve"], step="mariadb-install-db", timeout=180)
        log = self.log_dir / "mariadb.log"
        self._spawn("mariadbd", ["mariadbd", *common, f"--socket={self.db_socket}",
                                 f"--port={self.ports['mariadb']}", "--bind-address=127.0.0.1",
                                 "--skip-name-resolve", f"--pid-file={self.root}/run/mariadb.pid",
                                 f"--log-error={log}", "--innodb-buffer-pool-size=64M",
                                 # a throw-away test database: durability is not wanted, speed is
                                 "--innodb-flush-log-at-trx-commit=0", "--skip-log-bin",
                                 "--innodb-lock-wait-timeout=900"])
        client = ["mariadb", "--no-defaults", "-S", str(self.db_socket), "-u", "root"]

        def ready():
            p = self._run(["mariadb-admin", "--no-defaults", "-S", str(self.db_socket), "-u", "root", "ping"],
                          check=False, timeout=10)
            return p.returncode == 0, p.stderr

        self._wait("mariadbd", ready, 60, [self.log_dir / "mariadbd.out", log])
        sql = (f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_password}'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        self._run([*client, "-e", sql], step="mariadb user")

    def _start_slurmdbd(self) -> None:
        # slurmdbd has no -f: it reads slurmdbd.conf next to $SLURM_CONF.
        self._spawn("slurmdbd", ["slurmdbd", "-D"])

        def ready():
            p = self._run(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"], check=False, timeout=15)
            return p.returncode == 0, p.stderr

        self._wait("slurmdbd", ready, 90, [self.log_dir / "slurmdbd.out", self.log_dir / "slurmdbd.log"])
        # Registering the cluster before slurmctld starts also creates the root account and
        # association, so sacct and account validation work from the first job on.
        have = self._run(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"], step="slurmdbd").stdout
        if self.cluster_name not in have.split():
            self._run(["sacctmgr", "-i", "add", "cluster", self.cluster_name], step="sacctmgr add cluster")

    def _start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])

        def ready():
            p = self._run(["scontrol", "ping"], check=False, timeout=10)
            return p.returncode == 0 and "UP" in p.stdout, p.stdout + p.stderr

        self._wait("slurmctld", ready, 60, [self.log_dir / "slurmctld.out", self.log_dir / "slurmctld.log"])

    def _start_slurmd(self) -> None:
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.node, "-f", str(self.conf)])

        def ready():
            p = self._run(["sinfo", "-h", "-N", "-o", "%T"], check=False, timeout=10)
            state = p.stdout.strip()
            return p.returncode == 0 and state == "idle", state or p.stderr

        self._wait("slurmd", ready, 60, [self.log_dir / "slurmd.out", self.log_dir / "slurmd.log",
                                         self.log_dir / "slurmctld.log"])
        # The job's account must exist for the user: check the association slurmctld will enforce.
        assoc = self._run(["sacctmgr", "-n", "-P", "show", "assoc", f"cluster={self.cluster_name}",
                           "format=account,user"], step="accounting association").stdout
        if f"{self.account}|root" not in assoc.split():
            raise ClusterUnavailable("accounting association",
                                     f"no association account={self.account} user=root: {assoc!r}")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    cluster = SlurmCluster(argv[1])
    if argv[0] == "start":
        try:
            cluster.start()
        except ClusterUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"export SLURM_CONF={cluster.conf}")
        print(f"# partition {cluster.partition}, account {cluster.account}; "
              f"stop with: {sys.executable} {__file__} stop {cluster.root}", file=sys.stderr)
    else:
        for note in cluster.stop():
            print(f"stopped {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
