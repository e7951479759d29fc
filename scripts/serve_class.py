"""Serve a class: N replicas of the app behind HAProxy, each browser kept on one replica.

    scripts/serve_class.sh --replicas 2 [--port 8501] [--threads 1] [--address 0.0.0.0]

Starts N `streamlit run app.py` processes on 127.0.0.1, ports port+1 ... port+N, each with its own
thread count (OMP_NUM_THREADS) and, where the machine has a core for each, its own share of the
cores; then HAProxy on `--port`. HAProxy sends a new browser to the replica with the fewest open
connections and pins it there with a cookie, so the page, its websocket and its downloads all reach
the process that holds the session. It checks /_stcore/health every 2 s and takes a stopped replica
out. Ctrl-C stops everything. Logs: one file per replica and HAProxy's, in `--log-dir`.

With `--backend HOST:PORT` (repeated), no replica starts here: HAProxy balances over app servers
started on other machines. `--print-config` prints HAProxy's configuration and exits.
See docs/howto/serve-a-class.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COOKIE = "SPECDEC_REPLICA"
REPLICA_HEADER = "X-Specdec-Replica"
START_TIMEOUT_S = 120
PR_SET_PDEATHSIG = 1  # Linux prctl option


@dataclass(frozen=True)
class Replica:
    name: str  # the balancer's name for it, also the cookie's value and the header's
    host: str
    port: int
    cores: tuple[int, ...] | None = None  # pinned to these (None: shares every core)
    threads: int = 1


def plan_replicas(count: int, first_port: int, cores: list[int], threads: int) -> list[Replica]:
    """`count` local replicas on consecutive ports. With at least one core each, the cores are split
    into contiguous shares (the first shares take the remainder); with fewer, nobody is pinned."""
    shares: list[tuple[int, ...] | None] = [None] * count
    if len(cores) >= count:
        base, extra = divmod(len(cores), count)
        start = 0
        for i in range(count):
            size = base + (i < extra)
            shares[i] = tuple(cores[start : start + size])
            start += size
    return [Replica(f"r{i + 1}", "127.0.0.1", first_port + i, shares[i], threads) for i in range(count)]


def parse_backend(text: str, number: int) -> Replica:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--backend {text!r}: expected HOST:PORT, e.g. 10.0.0.11:8501")
    return Replica(f"r{number}", host, int(port))


def haproxy_config(address: str, port: int, replicas: list[Replica]) -> str:
    """HAProxy's whole configuration: one frontend, one backend, sticky by an inserted cookie."""
    servers = "\n".join(f"    server {r.name} {r.host}:{r.port} cookie {r.name}" for r in replicas)
    return f"""\
# Written by scripts/serve_class.py; see docs/howto/serve-a-class.md.
global
    maxconn 4096
    log stdout format raw local0

defaults
    mode http
    log global
    # Each request as soon as its reply starts (a websocket when it opens): time, client, replica,
    # status, bytes so far, browser (User-Agent), request line.
    option logasap
    log-format "%tr %ci:%cp %s %ST %B %hr %{{+Q}}r"
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout tunnel 4h           # an open page's websocket: a whole lesson
    option redispatch           # a request that cannot reach its replica goes to another
    retries 2
    # A replica killed mid-lesson leaves kept-alive connections that reset on the next request: that
    # request is retried on the other replica too (by default only a refused connection is), or a
    # student's reload shows a 502.
    retry-on all-retryable-errors

frontend class
    bind {address}:{port}
    capture request header User-Agent len 120
    default_backend replicas

backend replicas
    balance leastconn           # a new browser goes to the replica with the fewest open pages
    # Sticky per browser, not per address: students behind one campus NAT share an address.
    cookie {COOKIE} insert indirect nocache httponly
    option httpchk GET /_stcore/health
    http-check expect string ok
    default-server check inter 2s fall 2 rise 2
    http-response set-header {REPLICA_HEADER} %[srv_name]
{servers}
"""


def haproxy_binary() -> str | None:
    return shutil.which("haproxy") or next(
        (path for path in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(path, os.X_OK)), None
    )


def port_free(address: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def lan_address() -> str:
    """This machine's address on its network (no packet is sent), or its name."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
            return sock.getsockname()[0]
        except OSError:
            return socket.gethostname()


def start_replica(replica: Replica, log_dir: Path, streamlit_args: list[str]) -> subprocess.Popen:
    command = [str(ROOT / ".venv" / "bin" / "streamlit"), "run", "app.py",
               "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none", "--server.address", replica.host,
               "--server.port", str(replica.port), *streamlit_args]
    env = {**os.environ, "OMP_NUM_THREADS": str(replica.threads)}
    log = open(log_dir / f"{replica.name}.log", "w")  # noqa: SIM115 - the child keeps it
    try:  # its own process group: Ctrl-C reaches the launcher only, which stops each group
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=lambda: _child_setup(replica.cores))
    finally:
        log.close()


def _child_setup(cores: tuple[int, ...] | None) -> None:
    """In the child before it runs: pin it to its cores, and have it stopped if the launcher dies."""
    if cores:
        os.sched_setaffinity(0, cores)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def healthy(replica: Replica) -> bool:
    url = f"http://{replica.host}:{replica.port}/_stcore/health"
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.read() == b"ok"
    except OSError:
        return False


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM every process group, then SIGKILL what is left after 10 s: no orphans."""
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


class Stopped(Exception):
    pass


def _interrupt(signum, frame):  # noqa: ARG001
    raise Stopped


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Serve a class: N replicas of the app behind HAProxy, sticky per browser.",
        epilog="Arguments after -- go to every replica's `streamlit run`. See docs/howto/serve-a-class.md.",
    )
    parser.add_argument("--replicas", type=int, default=2, help="app processes to start here (default 2)")
    parser.add_argument("--port", type=int, default=8501,
                        help="the port students open (default 8501); replicas use the next")
    parser.add_argument("--address", default="0.0.0.0",
                        help="where the balancer listens (default 0.0.0.0: every interface)")
    parser.add_argument("--threads", type=int, default=1, help="threads per replica (default 1)")
    parser.add_argument("--backend", action="append", default=[], metavar="HOST:PORT",
                        help="balance over an app server on another machine instead (repeat it)")
    parser.add_argument("--log-dir", type=Path, help="where the logs go (default: a new temporary folder)")
    parser.add_argument("--print-config", action="store_true", help="print HAProxy's configuration and exit")
    own, rest = list(sys.argv[1:] if argv is None else argv), []
    if "--" in own:
        own, rest = own[: own.index("--")], own[own.index("--") + 1 :]
    args = parser.parse_args(own)
    args.streamlit_args = rest
    if args.replicas < 1:
        parser.error("--replicas must be at least 1")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if not 0 < args.port < 65536 - args.replicas:
        parser.error(f"--port {args.port} is not a free range of ports for {args.replicas} replicas")
    try:
        args.remote = [parse_backend(text, i + 1) for i, text in enumerate(args.backend)]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    return args


def start_replicas(replicas: list[Replica], log_dir: Path, streamlit_args: list[str],
                   local: dict[str, subprocess.Popen]) -> str | None:
    """Start each replica into `local` and wait until all answer /_stcore/health; -> an error, if any."""
    for replica in replicas:
        local[replica.name] = start_replica(replica, log_dir, streamlit_args)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not all(healthy(r) for r in replicas):
        dead = [name for name, process in local.items() if process.poll() is not None]
        if dead or time.monotonic() > deadline:
            return f"replica(s) {', '.join(dead) or 'all'} did not start; see {log_dir}"
        time.sleep(0.5)
    for replica in replicas:  # each loads its models now, not when its first student arrives
        subprocess.Popen([sys.executable, str(ROOT / "scripts" / "warm_server.py"), "--server.port",
                          str(replica.port)], start_new_session=True)
    return None


def start_balancer(haproxy: str, log_dir: Path) -> subprocess.Popen | str:
    """HAProxy in the foreground (-db), its log in log_dir; -> the process, or why it cannot start."""
    config = str(log_dir / "haproxy.cfg")
    check = subprocess.run([haproxy, "-c", "-q", "-f", config], capture_output=True, text=True)
    if check.returncode != 0:
        return f"HAProxy refused its configuration:\n{check.stderr}"
    with open(log_dir / "haproxy.log", "w") as log:
        return subprocess.Popen([haproxy, "-db", "-f", config], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: _child_setup(None))


def supervise(balancer: subprocess.Popen, local: dict[str, subprocess.Popen], log_dir: Path) -> int:
    """Until HAProxy stops, or every local replica has: say when a replica stops, carry on without it."""
    while balancer.poll() is None:
        for name, process in list(local.items()):
            if process.poll() is not None:
                print(f"replica {name} stopped (exit status {process.returncode}); its students "
                      "reconnect to the others and start their rounds again", flush=True)
                del local[name]
                if not local:
                    print("serve_class: every replica has stopped", file=sys.stderr)
                    return 1
        time.sleep(0.5)
    print(f"serve_class: HAProxy stopped; see {log_dir / 'haproxy.log'}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    replicas = args.remote or plan_replicas(args.replicas, args.port + 1, cores, args.threads)
    config = haproxy_config(args.address, args.port, replicas)
    if args.print_config:
        print(config, end="")
        return 0
    haproxy = haproxy_binary()
    if haproxy is None:
        return fail("HAProxy is not installed: scripts/serve_class.sh installs it (apt-get install haproxy)")
    ports = [args.port] + ([] if args.remote else [r.port for r in replicas])
    busy = [str(port) for port in ports if not port_free("127.0.0.1", port)]
    if busy:
        return fail(f"port(s) {', '.join(busy)} already in use; choose another --port")
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="specdec-class-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "haproxy.cfg").write_text(config)

    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    local: dict[str, subprocess.Popen] = {}
    balancer = None
    try:
        if not args.remote and (error := start_replicas(replicas, log_dir, args.streamlit_args, local)):
            return fail(error)
        balancer = start_balancer(haproxy, log_dir)
        if isinstance(balancer, str):
            return fail(balancer)
        print_banner(args, replicas, local, log_dir)
        return supervise(balancer, local, log_dir)
    except Stopped:
        print("\nserve_class: stopping", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        running = ([balancer] if isinstance(balancer, subprocess.Popen) else []) + list(local.values())
        stop(running)


def fail(message: str) -> int:
    print(f"serve_class: {message}", file=sys.stderr)
    return 1


def print_banner(args, replicas: list[Replica], local: dict[str, subprocess.Popen], log_dir: Path) -> None:
    host = lan_address() if args.address in ("0.0.0.0", "::") else args.address
    lines = [f"Students open: http://{host}:{args.port}",
             f"  (on this machine: http://localhost:{args.port})"]
    for r in replicas:
        where = f"http://{r.host}:{r.port}"
        if r.name in local:
            cores = ",".join(map(str, r.cores)) if r.cores else "shared"
            where += f"  pid {local[r.name].pid}, cores {cores}, {r.threads} thread(s)"
        lines.append(f"  replica {r.name}: {where}")
    lines.append(f"Logs: {log_dir}   Ctrl-C stops everything.")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
