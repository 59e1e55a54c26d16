"""The Debian 13 (trixie) root that holds a newer CPython, made once with debootstrap and reused,
and what runs in it: the mounts it needs, commands under ``chroot``, leftover processes.

``ensure_root(folder, log)`` reuses ``folder`` when its completion marker is there (after a quick
check that its ``python3`` runs), else makes it: ``apt-get install debootstrap`` when the command
is missing, ``debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates trixie
FOLDER MIRROR``, the check, and only then the marker. A folder without the marker is made again
only when it is empty or holds this module's in-progress stamp (an interrupted make); anything
else there is refused, never removed. Before a folder is removed every mount below it is
undone and checked gone (``shutil.rmtree`` would otherwise walk into a mounted ``/proc`` or
``/dev``).

``mounted(folder)`` mounts ``/proc`` and a private ``/dev/shm`` into the root (and binds the
host's ``/dev`` when the root has no device nodes of its own), and in its ``finally`` kills any
process still running in the root and undoes every mount below it, whatever happened.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SUITE = "trixie"
INCLUDE = ("python3", "python3-venv", "ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
MIRROR_ENV = "NARWHAL_NEWER_PYTHON_MIRROR"
ROOT_ENV = "NARWHAL_NEWER_PYTHON_ROOT"
MARKER = "narwhal-newer-python-root.json"
#: Written before debootstrap starts, removed with the marker's arrival: an interrupted make.
PARTIAL = "narwhal-newer-python-partial"
DEBOOTSTRAP_TIMEOUT_S = 30 * 60
APT_TIMEOUT_S = 15 * 60
#: The device nodes a root must have to run without the host's ``/dev``.
DEVICES = ("null", "zero", "random", "urandom")

_PROBE = (
    "import ensurepip, json, ssl, sys, venv; "
    "print(json.dumps({'version': sys.version.split()[0], 'hexversion': sys.hexversion}))"
)


class RootError(Exception):
    """The root cannot be made, checked, mounted or cleared."""


@dataclass(frozen=True)
class RootReport:
    """What ``ensure_root`` did, how long it took, and the root's Python."""

    folder: Path
    made: bool
    wall_s: float
    python: str
    hexversion: int


def default_root() -> Path:
    """``$NARWHAL_NEWER_PYTHON_ROOT``, else ``~/.cache/narwhal-newer-python/trixie``."""
    configured = os.environ.get(ROOT_ENV, "").strip()
    if configured:
        return Path(configured).expanduser().absolute()
    return Path.home() / ".cache" / "narwhal-newer-python" / SUITE


def mirror() -> str:
    """``$NARWHAL_NEWER_PYTHON_MIRROR``, else Debian's own archive."""
    return os.environ.get(MIRROR_ENV, "").strip() or DEFAULT_MIRROR


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``folder`` (``FOLDER.lock``): one run at a time uses a root,
    its mounts and its run folder."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f"{folder.name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file (or a note that there is none)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:])


def logged(
    argv: Sequence[str],
    log: Path,
    what: str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    """Run one command (from ``cwd``), its argv and outputs appended to ``log``; RootError with
    the log's tail when it fails or overruns (its whole process group is killed then)."""
    with log.open("a", encoding="utf-8") as out:
        _run_logged(argv, out, log, what, timeout_s, env, cwd)


def _run_logged(
    argv: Sequence[str],
    out: IO[str],
    log: Path,
    what: str,
    timeout_s: float,
    env: Mapping[str, str] | None,
    cwd: Path | None,
) -> None:
    out.write(f"$ {' '.join(argv)}\n")  # no secrets on these command lines
    out.flush()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise RootError(f"{what} cannot start: {exc}") from exc
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        kill_group(proc)
        raise RootError(f"{what} took over {timeout_s:.0f} s; log tail:\n{tail(log)}") from exc
    except BaseException:
        kill_group(proc)
        raise
    out.write(f"(exit {code})\n\n")
    out.flush()
    if code != 0:
        raise RootError(f"{what} exited {code}; log tail:\n{tail(log)}")


def kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group this module started ``proc`` in, and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _debootstrap() -> str:
    found = host_tool("debootstrap")
    return found if Path(found).is_absolute() else ""


def install_debootstrap(log: Path) -> str:
    """``debootstrap``'s path; installed with apt-get first when it is missing."""
    found = _debootstrap()
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    logged(["apt-get", "update", "-qq"], log, "apt-get update", APT_TIMEOUT_S, env)
    logged(
        ["apt-get", "install", "-y", "-qq", "debootstrap"],
        log,
        "apt-get install debootstrap",
        APT_TIMEOUT_S,
        env,
    )
    found = _debootstrap()
    if not found:
        raise RootError(f"apt-get installed debootstrap but it is not on PATH; see {log}")
    return found


def mounts_below(folder: Path) -> list[Path]:
    """Every mount point at or below ``folder``, deepest first (``/proc/self/mountinfo``)."""
    top = os.path.realpath(folder)
    found: list[Path] = []
    with Path("/proc/self/mountinfo").open(encoding="utf-8") as info:
        for line in info:
            # Field 5 is the mount point, octal-escaped (\040 for a space).
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if point == top or point.startswith(top.rstrip("/") + "/"):
                found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_all(folder: Path) -> list[Path]:
    """Undo every mount below ``folder`` (lazily when one is busy); RootError if any remains.
    Returns the mount points it undid."""
    undone: list[Path] = []
    for _ in range(3):
        points = mounts_below(folder)
        if not points:
            return undone
        for point in points:
            umount = host_tool("umount")
            done = subprocess.run([umount, str(point)], capture_output=True, check=False)
            if done.returncode != 0:
                subprocess.run([umount, "-l", str(point)], capture_output=True, check=False)
            undone.append(point)
    left = mounts_below(folder)
    if left:
        raise RootError(f"cannot unmount {', '.join(map(str, left))}")
    return undone


def processes_in(folder: Path) -> list[int]:
    """The ids of the processes whose root directory is ``folder`` (they run in the chroot)."""
    top = os.path.realpath(folder)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if str((entry / "root").readlink()) == top:
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or a kernel thread
    return found


def kill_processes_in(folder: Path) -> list[int]:
    """SIGKILL every process still running in the root; the ids it found."""
    found = processes_in(folder)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while found and processes_in(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def remove_root(folder: Path) -> None:
    """Remove a root: its mounts undone and checked gone first."""
    kill_processes_in(folder)
    unmount_all(folder)
    if mounts_below(folder):  # never walk into a mounted /proc or /dev
        raise RootError(f"{folder} still has mounts; not removed")
    shutil.rmtree(folder)


def probe(folder: Path, log: Path) -> tuple[str, int]:
    """The root's ``python3`` version (it must import ``venv``, ``ensurepip`` and ``ssl``)."""
    argv = [*in_root(folder, "/", ["/usr/bin/python3", "-c", _PROBE])]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            env=chroot_env({}),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RootError(f"the root's python3 cannot run: {exc}") from exc
    if done.returncode != 0:
        raise RootError(
            f"the root's python3 cannot run (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
            f"\nremove {folder} (or run with --fresh) to make it again; log: {log}"
        )
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    return str(doc["version"]), int(doc["hexversion"])


def ensure_root(folder: Path, log: Path, *, fresh: bool = False) -> RootReport:
    """Reuse the root at ``folder`` when its marker is there (``fresh``: make it again), else make
    it with debootstrap; check its Python; write the marker last."""
    start = time.monotonic()
    marker = folder / MARKER
    if fresh and folder.exists():
        if not (marker.is_file() or (folder / PARTIAL).is_file()):
            raise RootError(f"{folder} is not a root this tool made; not removed")
        remove_root(folder)
    if marker.is_file():
        version, hexversion = probe(folder, log)
        return RootReport(folder, False, time.monotonic() - start, version, hexversion)
    if folder.exists():
        if (folder / PARTIAL).is_file() or not any(folder.iterdir()):
            remove_root(folder)  # an interrupted make: start again
        else:
            raise RootError(
                f"{folder} exists, is not empty and is not a root this tool made; remove it or"
                f" set {ROOT_ENV}"
            )
    log.parent.mkdir(parents=True, exist_ok=True)
    debootstrap = install_debootstrap(log)
    folder.mkdir(parents=True)
    (folder / PARTIAL).write_text("debootstrap started\n", encoding="utf-8")
    source = mirror()
    argv = [
        debootstrap,
        "--variant=minbase",
        f"--include={','.join(INCLUDE)}",
        SUITE,
        str(folder),
        source,
    ]
    try:
        logged(argv, log, "debootstrap", DEBOOTSTRAP_TIMEOUT_S)
    finally:
        # debootstrap mounts /proc and /sys in the root while it works: none may stay, even when
        # it failed or was interrupted.
        unmount_all(folder)
    version, hexversion = probe(folder, log)
    wall = time.monotonic() - start
    doc = {
        "suite": SUITE,
        "variant": "minbase",
        "include": list(INCLUDE),
        "mirror": source,
        "python": version,
        "make_wall_s": round(wall, 1),
        "completed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(marker)
    (folder / PARTIAL).unlink()
    return RootReport(folder, True, wall, version, hexversion)


def _has_devices(folder: Path) -> bool:
    for name in DEVICES:
        try:
            if not stat.S_ISCHR((folder / "dev" / name).lstat().st_mode):
                return False
        except OSError:
            return False
    return True


def _mount(argv: list[str]) -> None:
    done = subprocess.run([host_tool("mount"), *argv], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RootError(f"mount {' '.join(argv)} failed: {done.stderr.strip()}")


@contextlib.contextmanager
def mounted(folder: Path) -> Iterator[list[str]]:
    """``/proc``, a private ``/dev/shm`` (and the host's ``/dev`` when the root has no device
    nodes) mounted in the root; yields what was mounted. Whatever happens, on the way out every
    process left in the root is killed and every mount below it undone."""
    unmount_all(folder)  # what a killed run left
    done: list[str] = []
    try:
        _mount(["-t", "proc", "proc", str(folder / "proc")])
        done.append("/proc (proc)")
        if not _has_devices(folder):
            _mount(["--bind", "/dev", str(folder / "dev")])
            done.append("/dev (bind of the host's)")
        (folder / "dev" / "shm").mkdir(exist_ok=True)
        _mount(["-t", "tmpfs", "-o", "size=512m,mode=1777", "tmpfs", str(folder / "dev" / "shm")])
        done.append("/dev/shm (tmpfs)")
        yield done
    finally:
        kill_processes_in(folder)
        unmount_all(folder)


#: Variables passed from the caller's environment into the chroot (proxies and pip's index
#: settings, as an operator's pip would see them); nothing else crosses.
PASSED = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_RETRIES",
)


def chroot_env(extra: Mapping[str, str]) -> dict[str, str]:
    """A clean environment for commands in the root: PATH, HOME, a UTF-8 locale, the passed
    variables, then ``extra``."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    env.update({k: os.environ[k] for k in PASSED if k in os.environ})
    env.update(extra)
    return env


def host_tool(name: str) -> str:
    """A host command's path: from PATH, else from the system folders (``chroot`` is in
    ``/usr/sbin``, which a user's PATH may lack)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") or name


def in_root(folder: Path, cwd: str, argv: Sequence[str]) -> list[str]:
    """The host command that runs ``argv`` in the root, from ``cwd`` (a path in the root)."""
    return [host_tool("chroot"), str(folder), "/usr/bin/env", f"--chdir={cwd}", *argv]
