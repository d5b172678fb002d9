"""The node images of the docker backend, built from nothing and cached by the hash of their inputs.

Three images stack up, each tagged with a hash of everything that goes into it, so that a build
whose inputs did not change is a lookup (`ensure_images` returns in well under a second): the
base (`kraft-jepsen/base:<hash>`, a Debian root made by debootstrap, so no registry is needed),
the node (`kraft-jepsen/node:<hash>`, the project and its pinned runtime dependencies installed
from wheels built here, so the build fetches nothing) and, only when a run needs it, a target's
layer (`kraft-jepsen/node-<packages>:<hash>`, the Debian packages a target's program comes in).

Builds by several processes at once are serialised by a lock file in the cache directory; outdated
node images and target layers are untagged by the build that replaces them (`_prune_old`).

Details (what each hash covers, the registry fallback, the labels): docs/internals/harness.md#images
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = PROJECT_ROOT / "docker"
CACHE_DIR = Path(os.environ.get("KRAFT_JEPSEN_CACHE", Path.home() / ".cache" / "kraft-jepsen"))

PROJECT_LABEL = "kraft-jepsen"  # on every image, container and network the project makes
INPUTS_LABEL = "kraft-jepsen.inputs"
BASE_REPO = "kraft-jepsen/base"
NODE_REPO = "kraft-jepsen/node"
NODE_LATEST = f"{NODE_REPO}:latest"
TARGET_REPO_PREFIX = f"{NODE_REPO}-"  # + the packages: kraft-jepsen/node-etcd-server
PACKAGES_LABEL = "kraft-jepsen.packages"
# Debian policy 5.6.1: what a package name may be (anything else is refused, never interpolated
# into the build's shell command)
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # apt's colours in the build output

# fuse3 (with libfuse3-3): the disk nemeses' filesystem runs inside the node containers
BASE_PACKAGES = ("python3", "python3-venv", "openssh-server", "iproute2", "iptables", "procps",
                 "tini", "fuse3")
REGISTRY_BASE = "python:3.11-slim"
DEFAULT_RELEASE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# what `kraft node` imports beyond the standard library (uvloop: its event loop), and `kraft
# faultfs` (mfusepy)
NODE_DISTRIBUTIONS = ("kio", "mfusepy", "uvloop")
PACKAGE_DIRS = ("reference_node", "harness", "nemesis", "checkers", "workloads")

Progress = Callable[[str], None]


class ImageError(RuntimeError):
    """An image could not be built; the message says what is missing and how to get it."""


@dataclass(frozen=True)
class BuildOptions:
    base: str = "debootstrap"  # or "registry": FROM python:3.11-slim
    release: str = DEFAULT_RELEASE
    mirror: str | None = None  # None: the host's own Debian mirror (apt sources)
    extra_distributions: tuple[str, ...] = ()
    force: bool = False  # rebuild even when an image with the same inputs exists


def docker_client() -> Any:
    """A client of the local engine, or an ImageError saying how to get one."""
    try:
        # Through importlib: for mypy run from the project root, `docker` is the image folder.
        docker: Any = importlib.import_module("docker")
    except ImportError as exc:
        raise ImageError("the docker SDK is missing: pip install 'docker>=7'") from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise ImageError(
            f"no Docker engine answers at {where} ({exc}); start one (e.g. `apt-get install "
            "docker.io && systemctl start docker`), set DOCKER_HOST, or use --backend local"
        ) from exc
    return client


def ensure_images(options: BuildOptions | None = None, progress: Progress | None = None,
                  client: Any = None) -> str:
    """Build what is missing and return the node image's tag."""
    options = options or BuildOptions()
    say = progress or (lambda line: None)
    client = client or docker_client()
    with _build_lock():
        base = ensure_base(client, options, say)
        return ensure_node(client, base, options, say)


def ensure_target_image(packages: tuple[str, ...], options: BuildOptions | None = None,
                        progress: Progress | None = None, client: Any = None) -> str:
    """The image a target's nodes run in: the node image when `packages` is empty, else the
    node image with those Debian packages installed (built when missing); returns its tag."""
    wanted = target_packages(packages)
    if not wanted:
        return ensure_images(options, progress, client)
    options = options or BuildOptions()
    say = progress or (lambda line: None)
    client = client or docker_client()
    with _build_lock():
        base = ensure_base(client, options, say)
        node = ensure_node(client, base, options, say)
        return _ensure_target(client, node, wanted, options, say)


def ensure_target_layer(client: Any, node: str, packages: tuple[str, ...],
                        options: BuildOptions, progress: Progress) -> str:
    """The layer of `packages` on the node image `node`, already built (`kraft images build
    --target`, after `ensure_images`); built when missing or `options.force`."""
    with _build_lock():
        return _ensure_target(client, node, target_packages(packages), options, progress)


def image_available() -> bool:
    """Whether a node image was ever built here (`kraft-jepsen/node:latest`), for `--backend
    auto`. A stale one is fine: the docker backend refreshes it at setup when inputs changed."""
    try:
        client = docker_client()
    except ImageError:
        return False
    try:
        return _image_exists(client, NODE_LATEST)
    finally:
        client.close()


# --- base image ---------------------------------------------------------------------------------

def ensure_base(client: Any, options: BuildOptions, say: Progress) -> str:
    if options.base not in ("debootstrap", "registry"):
        raise ImageError(f"unknown base {options.base!r}: choose debootstrap or registry")
    mirror = options.mirror or host_mirror(options.release)
    tag = f"{BASE_REPO}:{base_hash(options, mirror)}"
    if not options.force and _image_exists(client, tag):
        say(f"base image {tag} is cached")
        return tag
    labels = {PROJECT_LABEL: "1", INPUTS_LABEL: tag.rsplit(":", 1)[1]}
    if options.base == "registry":
        _docker_build(client, DOCKER_DIR / "base-registry", tag, labels, {}, say)
    else:
        _build_debootstrap_base(client, options.release, mirror, tag, labels, say)
    return tag


def base_hash(options: BuildOptions, mirror: str) -> str:
    if options.base == "registry":
        return _hash_parts([b"registry", *_dir_contents(DOCKER_DIR / "base-registry")])
    return _hash_parts([b"debootstrap", options.release.encode(), mirror.encode(),
                        ",".join(BASE_PACKAGES).encode(),
                        *_dir_contents(DOCKER_DIR / "base")])


def _build_debootstrap_base(client: Any, release: str, mirror: str, tag: str,
                            labels: dict[str, str], say: Progress) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is missing: `apt-get install debootstrap` (or build with "
                         "--base registry where a registry answers)")
    if os.geteuid() != 0:
        raise ImageError("debootstrap needs root: run `sudo kraft images build` once; the "
                         "images are cached for every user of this engine")
    script = DOCKER_DIR / "base" / "build-rootfs.sh"
    with tempfile.TemporaryDirectory(prefix="kraft-jepsen-base-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        argv = ["sh", str(script), release, mirror, ",".join(BASE_PACKAGES), str(tar),
                str(CACHE_DIR / "debootstrap")]
        say(f"building base image {tag} with debootstrap ({release}, {mirror})")
        _run_streaming(argv, say, what="debootstrap")
        say(f"importing {tar.stat().st_size // 2**20} MiB root as {tag}")
        repo, version = tag.rsplit(":", 1)
        changes = [f"LABEL {key}={value}" for key, value in labels.items()]
        changes += ["ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]']
        client.api.import_image_from_file(str(tar), repository=repo, tag=version,
                                          changes=changes)
    if not _image_exists(client, tag):
        raise ImageError(f"docker import of the base root did not produce {tag}")


def host_mirror(release: str) -> str:
    """The Debian mirror this host's apt uses for `release` (the one known to be reachable)."""
    sources = Path("/etc/apt")
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for uri, suites in _apt_entries(text, deb822=path.suffix == ".sources"):
            if release in suites and "security" not in uri:
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _apt_entries(text: str, deb822: bool) -> Iterator[tuple[str, list[str]]]:
    if not deb822:
        for line in text.splitlines():
            words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                yield words[1], [words[2]]
        return
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if ":" in line and not line.lstrip().startswith("#"):
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
            for uri in fields.get("uris", "").split():
                yield uri, fields.get("suites", "").split()


# --- node image ---------------------------------------------------------------------------------

def ensure_node(client: Any, base: str, options: BuildOptions, say: Progress) -> str:
    pins = node_pins(options.extra_distributions)
    tag = f"{NODE_REPO}:{node_hash(base, pins)}"
    if not options.force and _image_exists(client, tag):
        say(f"node image {tag} is cached")
        client.api.tag(tag, NODE_REPO, "latest")
        return tag
    with tempfile.TemporaryDirectory(prefix="kraft-jepsen-node-") as tmp:
        context = Path(tmp) / "context"
        shutil.copytree(DOCKER_DIR / "node", context)
        (context / "wheels" / "deps").mkdir(parents=True)
        (context / "wheels" / "project").mkdir()
        for name, version in pins:
            shutil.copy(dependency_wheel(name, version, say), context / "wheels" / "deps")
        say("building the project's wheel")
        build_project_wheel(context / "wheels" / "project", Path(tmp), say)
        # Labels come from the Dockerfile: each label given here would cost one more layer.
        _docker_build(client, context, tag, {}, {"BASE": base}, say)
    client.api.tag(tag, NODE_REPO, "latest")
    _prune_old(client, NODE_REPO, keep=tag, say=say)
    return tag


def _prune_old(client: Any, repo: str, keep: str, say: Progress) -> None:
    """Untag the images of `repo` made from earlier inputs, so that every edit does not leave
    200 MB behind. Those of the last hour stay (a run starting now may have just looked one up),
    and one used by a container is refused by the engine and kept."""
    cutoff = time.time() - 3600
    for image in client.images.list(name=repo):
        created = str(image.attrs.get("Created", ""))[:19]
        try:
            if calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%S")) > cutoff:
                continue
        except ValueError:
            continue
        for old in image.tags:
            if old in (keep, f"{repo}:latest") or not old.startswith(f"{repo}:"):
                continue
            try:
                client.images.remove(old)
                say(f"removed the outdated {old}")
            except Exception as exc:  # in use, or removed meanwhile by another build
                say(f"kept {old}: {str(exc).splitlines()[0][:120]}")


def node_hash(base: str, pins: list[tuple[str, str]]) -> str:
    return _hash_parts([base.encode(), json.dumps(pins).encode(),
                        *_dir_contents(DOCKER_DIR / "node"),
                        *(_file_part(PROJECT_ROOT, path) for path in project_files())])


def node_pins(extra: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """The node's runtime distributions and their dependencies, at the versions installed here."""
    seen: dict[str, str] = {}
    pending = list(NODE_DISTRIBUTIONS + extra)
    while pending:
        name = pending.pop()
        key = canonicalize_name(name)
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise ImageError(f"{name} (needed by the node image) is not installed on this host: "
                             f"`pip install -e {PROJECT_ROOT}` installs it") from exc
        seen[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pending.append(req.name)
    return sorted(seen.items())


def project_files() -> list[Path]:
    """The files a wheel of the project is made of, relative to its root."""
    files = [Path("pyproject.toml")]
    if (PROJECT_ROOT / "README.md").exists():
        files.append(Path("README.md"))
    for package in PACKAGE_DIRS:
        for path in sorted((PROJECT_ROOT / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append(path.relative_to(PROJECT_ROOT))
    return files


def build_project_wheel(out: Path, tmp: Path, say: Progress) -> None:
    # A copy, so that setuptools' build/ and egg-info never land in the working tree.
    source = tmp / "source"
    for rel in project_files():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / rel, source / rel)
    if not (source / "README.md").exists():
        (source / "README.md").write_text("kraft-jepsen\n")  # pyproject.toml names it
    argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
            "--disable-pip-version-check", "-w", str(out), str(source)]
    if _can_build_wheels_offline():
        argv.insert(5, "--no-build-isolation")
    _run_streaming(argv, say, what="pip wheel of the project (without `wheel` or setuptools>=70.1 "
                   "installed here, pip fetches the build backend from PyPI)")


def _can_build_wheels_offline() -> bool:
    """Whether this Python's setuptools makes wheels by itself (else pip isolates and fetches)."""
    try:
        setuptools_version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(part) for part in re.findall(r"\d+", setuptools_version)[:2])
    if (major, minor) >= (70, 1):
        return True
    return importlib.util.find_spec("wheel") is not None


def dependency_wheel(name: str, version: str, say: Progress) -> Path:
    """A wheel of name==version from the cache, built (or downloaded) by pip on a miss."""
    cache = CACHE_DIR / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    prefix = f"{canonicalize_name(name).replace('-', '_')}-{version}-"
    for path in sorted(cache.glob("*.whl")):
        if path.name.lower().startswith(prefix):
            return path
    say(f"fetching a wheel of {name}=={version}")
    _run_streaming([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "-w", str(cache), f"{name}=={version}"],
                   say, what=f"pip wheel {name}=={version} (needs PyPI or pip's cache)")
    for path in sorted(cache.glob("*.whl")):
        if path.name.lower().startswith(prefix):
            return path
    raise ImageError(f"pip made no wheel of {name}=={version} in {cache}")


# --- target layers ------------------------------------------------------------------------------

def target_packages(packages: tuple[str, ...]) -> tuple[str, ...]:
    """The packages sorted and without repeats; an ImageError for a name Debian would refuse."""
    for name in packages:
        if not _DEBIAN_PACKAGE.fullmatch(name):
            raise ImageError(f"{name!r} is not a Debian package name (lower-case letters, "
                             "digits, + - .); fix the target's image_packages()")
    return tuple(sorted(set(packages)))


def target_hash(node: str, packages: tuple[str, ...]) -> str:
    return _hash_parts([node.encode(), " ".join(target_packages(packages)).encode(),
                        *_dir_contents(DOCKER_DIR / "target")])


def target_repo(packages: tuple[str, ...]) -> str:
    """kraft-jepsen/node-etcd-server: the packages in the name, so `docker images` tells."""
    slug = re.sub(r"[^a-z0-9.]+", "-", "-".join(target_packages(packages)))[:64].strip("-.")
    return f"{TARGET_REPO_PREFIX}{slug or 'packages'}"


def _ensure_target(client: Any, node: str, packages: tuple[str, ...], options: BuildOptions,
                   say: Progress) -> str:
    wanted = target_packages(packages)
    inputs = target_hash(node, wanted)
    repo = target_repo(wanted)
    tag = f"{repo}:{inputs}"
    if not options.force and _image_exists(client, tag):
        say(f"target layer {tag} ({' '.join(wanted)}) is cached")
        return tag
    say(f"building target layer {tag}: apt-get install {' '.join(wanted)} on {node}")
    recipe = (DOCKER_DIR / "target" / "Dockerfile").read_text()
    with tempfile.TemporaryDirectory(prefix="kraft-jepsen-target-") as context:
        (Path(context) / "Dockerfile").write_text(
            recipe.replace("@PACKAGES@", " ".join(wanted)).replace("@INPUTS@", inputs))
        _docker_build(client, Path(context), tag, {}, {"NODE": node}, say, nocache=options.force)
    _prune_old(client, repo, keep=tag, say=say)
    return tag


# --- helpers ------------------------------------------------------------------------------------

def _docker_build(client: Any, context: Path, tag: str, labels: dict[str, str],
                  buildargs: dict[str, str], say: Progress, nocache: bool = False) -> None:
    say(f"docker build {tag}")
    stream = client.api.build(path=str(context), tag=tag, labels=labels, buildargs=buildargs,
                              rm=True, forcerm=True, decode=True, nocache=nocache)
    for chunk in stream:
        if "error" in chunk:
            raise ImageError(f"docker build of {tag} failed: {chunk['error'].strip()}")
        for line in _ANSI.sub("", str(chunk.get("stream", ""))).splitlines():
            if line.strip():
                say(line.rstrip())
    if not _image_exists(client, tag):
        raise ImageError(f"docker build did not produce {tag}")


def _run_streaming(argv: list[str], say: Progress, what: str) -> None:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        say(line.rstrip())
        tail = [*tail[-19:], line.rstrip()]
    if proc.wait() != 0:
        raise ImageError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def _image_exists(client: Any, tag: str) -> bool:
    errors: Any = importlib.import_module("docker.errors")
    try:
        client.images.get(tag)
    except errors.ImageNotFound:
        return False
    return True


def _dir_contents(directory: Path) -> list[bytes]:
    return [_file_part(directory, path.relative_to(directory))
            for path in sorted(directory.rglob("*")) if path.is_file()]


def _file_part(root: Path, rel: Path) -> bytes:
    path = root / rel
    # The mode matters too: the scripts copied into images must stay executable.
    return f"{rel}:{path.stat().st_mode & 0o111:o}:".encode() + path.read_bytes()


def _hash_parts(parts: list[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / "images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
