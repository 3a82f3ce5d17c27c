"""Build (or reuse) the agent's wheelhouse for one target platform, on the Ansible controller.

The role runs this with the controller's Python (`ansible_playbook_python`). It builds the agent
wheel from the vendored source and downloads every dependency wheel, pinned by a constraints
file, for the *target's* platform, architecture and Python: then installs them once
(`pip --no-index --require-hashes`) into an environment it packs with each file's sha256: hosts
unpack it and never need pip, an index or the internet.

Dependencies are resolved here rather than by `pip download`, because pip evaluates environment
markers against the controller's interpreter, not the target's (a Python 3.10 or macOS target
needs wheels a Linux 3.11 controller would skip).

The result is cached under --cache by agent version, platform tag, Python and a hash of the
inputs, so a second run is a lookup. It prints one JSON object: where the wheelhouse is, its
key, the sha256 of each wheel, and the environment archive and its sha256. Errors are one line
on stderr (exit 1; 2 for bad arguments).
"""

from __future__ import annotations

import argparse
import compileall
import email.parser
import gzip
import hashlib
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pragma: no cover - ansible-core depends on packaging
    sys.stderr.write("build_wheelhouse: the controller's Python lacks 'packaging'\n")
    sys.exit(1)

# Bump when the layout of the wheelhouse changes, so old cache entries are not reused.
FORMAT = "3"
# In the environment archive: each file's sha256 (the host checks them after unpacking).
ENV_MANIFEST = ".wfa-env.json"
# Zip timestamps of the agent wheel (zip cannot store dates before 1980): reproducible builds.
SOURCE_DATE_EPOCH = "315532800"
SKIP_DIRS = {"__pycache__", "build", "dist", "tests", ".pytest_cache", ".ruff_cache", ".wheels"}
VERSION_RE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)


class BuildError(Exception):
    """A problem the user can act on; its text is the one line we print."""


def source_files(src: str) -> list[str]:
    """Relative paths of the agent source that go into the wheel (sorted, caches excluded)."""
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                out.append(os.path.relpath(os.path.join(root, name), src))
    return out


def agent_version(src: str) -> str:
    init = os.path.join(src, "src", "workflow_agent", "__init__.py")
    try:
        with open(init, encoding="utf-8") as fh:
            match = VERSION_RE.search(fh.read())
    except OSError as exc:
        raise BuildError(f"{src} is not the agent's source ({init}: {exc.strerror})") from None
    if not match:
        raise BuildError(f"{init}: no __version__ found")
    return match.group(1)


def read_pins(path: str, env: dict[str, str]) -> dict[str, str]:
    """name==version pins; a line may end in `; <marker>`, evaluated for the target."""
    pins = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                req = Requirement(line)
            except ValueError:
                raise BuildError(f"{path}: line {number}: expected name==version") from None
            specs = list(req.specifier)
            if len(specs) != 1 or specs[0].operator != "==":
                raise BuildError(f"{path}: line {number}: expected name==version")
            if req.marker is None or req.marker.evaluate(dict(env, extra="")):
                pins[canonicalize_name(req.name)] = specs[0].version
    return pins


def platform_tags(system: str, machine: str, libc: str, macos: str) -> list[str]:
    """pip --platform tags a target accepts, best first (pip only expands legacy aliases)."""
    if system == "linux":
        arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(machine, machine)
        match = re.fullmatch(r"2\.(\d+)", libc or "")
        if not match:
            raise BuildError(f"unsupported C library {libc!r}: glibc 2.17 or later is needed")
        newest = int(match.group(1))
        tags = [f"manylinux_2_{minor}_{arch}" for minor in range(newest, 4, -1)]
        return tags + [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    if system == "darwin":
        major = (macos or "13").split(".")[0]
        return [f"macosx_{major}_0_{machine}"]  # pip expands older macOS versions and universal2
    raise BuildError(f"unsupported target platform {system!r}")


def marker_env(system: str, machine: str, python: str) -> dict[str, str]:
    return {
        "implementation_name": "cpython",
        "implementation_version": python + ".0",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": {"linux": "Linux", "darwin": "Darwin"}[system],
        "platform_version": "",
        "python_full_version": python + ".0",
        "python_version": python,
        "sys_platform": system,
    }


def wheel_metadata(path: str) -> email.message.Message:
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))


def wanted(req: Requirement, extras: set[str], env: dict[str, str]) -> bool:
    if req.marker is None:
        return True
    return any(Marker(str(req.marker)).evaluate(dict(env, extra=extra)) for extra in {""} | extras)


def run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise BuildError(f"{what} failed: {lines[-1] if lines else 'exit ' + str(proc.returncode)}")


def pip_base(args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    return cmd + (["--index-url", args.index_url] if args.index_url else [])


def can_build_offline() -> bool:
    """The agent's build backend (setuptools>=77) is already here: no isolated build env."""
    try:
        from importlib.metadata import version

        return int(version("setuptools").split(".")[0]) >= 77
    except Exception:  # noqa: BLE001 - any doubt means "use an isolated build"
        return False


def build(args: argparse.Namespace, key: str, version: str, pins: dict[str, str], out: str) -> None:
    work = tempfile.mkdtemp(prefix="work-", dir=out)
    src_copy = os.path.join(work, "agent")
    # Build from a copy: an installed collection may be read-only, and the build writes egg-info.
    for rel in source_files(args.source):
        dest = os.path.join(src_copy, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(args.source, rel), dest)
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
    cmd = pip_base(args) + ["wheel", "--no-deps", "--wheel-dir", out, src_copy]
    if can_build_offline():
        cmd.insert(cmd.index("wheel") + 1, "--no-build-isolation")
    run(cmd, "building the agent wheel", env)
    shutil.rmtree(work)
    agent_whl = next(f for f in os.listdir(out) if f.endswith(".whl"))

    tags = platform_tags(args.system, args.machine, args.libc, args.macos)
    menv = marker_env(args.system, args.machine, args.python)
    todo = [
        (Requirement(r), set(args.extras))
        for r in wheel_metadata(os.path.join(out, agent_whl)).get_all("Requires-Dist") or []
    ]
    seen: dict[str, set[str]] = {}
    while todo:
        batch = []
        for req, extras in todo:
            if not wanted(req, extras, menv):
                continue
            name = canonicalize_name(req.name)
            if name not in pins:
                raise BuildError(
                    f"{req.name} is needed on the target but has no pin in {args.constraints}"
                )
            if not req.specifier.contains(pins[name], prereleases=True):
                raise BuildError(f"pin {name}=={pins[name]} does not satisfy {req}")
            if name in seen and req.extras <= seen[name]:
                continue
            seen[name] = seen.get(name, set()) | set(req.extras)
            batch.append((name, set(req.extras)))
        todo = []
        if not batch:
            break
        before = set(os.listdir(out))
        have = {canonicalize_name(_wheel_name(f)) for f in before}
        names = sorted({n for n, _extras in batch} - have)
        if names:
            cmd = pip_base(args) + [
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                args.python,
                "--implementation",
                "cp",
                "--dest",
                out,
            ]
            for tag in tags:
                cmd += ["--platform", tag]
            run(cmd + [f"{n}=={pins[n]}" for n in names], f"downloading {', '.join(names)}")
        for name, extras in batch:
            whl = next(f for f in os.listdir(out) if canonicalize_name(_wheel_name(f)) == name)
            for line in wheel_metadata(os.path.join(out, whl)).get_all("Requires-Dist") or []:
                todo.append((Requirement(line), extras))

    files = {f: sha256(os.path.join(out, f)) for f in sorted(os.listdir(out))}
    # The agent's distribution name as its wheel states it (pyproject.toml is the one source).
    name = wheel_metadata(os.path.join(out, agent_whl))["Name"]
    top = name + (f"[{','.join(sorted(args.extras))}]" if args.extras else "")
    lines = [f"{top}=={version} --hash=sha256:{files[agent_whl]}"]
    for name in sorted(seen):
        whl = next(f for f in files if canonicalize_name(_wheel_name(f)) == name)
        lines.append(f"{name}=={_wheel_version(whl)} --hash=sha256:{files[whl]}")
    with open(os.path.join(out, "requirements.txt"), "w", encoding="utf-8") as fh:
        fh.write("# Generated by build_wheelhouse.py; installed with --no-index --require-hashes\n")
        fh.write("\n".join(lines) + "\n")
    files["requirements.txt"] = sha256(os.path.join(out, "requirements.txt"))
    archive = key + ".tar.gz"
    build_env(args, out, archive)
    manifest = {
        "key": key,
        "version": version,
        "files": files,
        "archive": archive,
        "archive_sha256": sha256(os.path.join(out, archive)),
    }
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)


def build_env(args: argparse.Namespace, out: str, archive: str) -> None:
    """The installed environment for the target, once per platform: the wheelhouse installed
    (hash-checked) into lib/pythonX.Y/site-packages, compiled when the controller's Python is
    the target's, packed as a deterministic tar.gz with ENV_MANIFEST (each file's sha256). A
    host makes a venv without pip and unpacks it (files/install_env.py): no pip, no resolver and
    no wheel unpacking on each host. Console scripts are written there (their shebang names the
    host's venv)."""
    tree = tempfile.mkdtemp(prefix="env-", dir=out)
    site = os.path.join(tree, "lib", f"python{args.python}", "site-packages")
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    cmd += ["install", "--no-index", "--find-links", out, "--require-hashes", "--no-compile"]
    cmd += ["--only-binary=:all:", "--implementation", "cp", "--python-version", args.python]
    for tag in platform_tags(args.system, args.machine, args.libc, args.macos):
        cmd += ["--platform", tag]
    # Only the wheelhouse: no pip configuration of the controller's (an index, find-links).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    run(
        cmd + ["--target", site, "-r", os.path.join(out, "requirements.txt")],
        "installing the wheelhouse",
        env,
    )
    shutil.rmtree(os.path.join(site, "bin"), ignore_errors=True)  # the controller's shebangs
    cache_tag = "cpython-" + args.python.replace(".", "")
    compiled = sys.implementation.cache_tag == cache_tag
    if compiled:  # hash-based .pyc: valid whatever the files' times
        compileall.compile_dir(
            site, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
        )
    names = []
    for root, dirs, files in os.walk(tree):
        dirs.sort()
        names += [os.path.relpath(os.path.join(root, f), tree) for f in sorted(files)]
    listing = {
        "python": args.python,
        "compiled": cache_tag if compiled else "",
        "files": {n: sha256(os.path.join(tree, n)) for n in names},
    }
    with open(os.path.join(tree, ENV_MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(listing, fh, indent=0, sort_keys=True)
    # Deterministic: sorted, root's, fixed times and modes, gzip without a timestamp.
    with (
        open(os.path.join(out, archive), "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name in [ENV_MANIFEST] + names:
            path = os.path.join(tree, name)
            info = tar.gettarinfo(path, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = int(SOURCE_DATE_EPOCH)
            info.mode = 0o755 if os.stat(path).st_mode & 0o111 else 0o644
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
    shutil.rmtree(tree)


def _wheel_name(filename: str) -> str:
    return filename.split("-", 1)[0]


def _wheel_version(filename: str) -> str:
    return filename.split("-")[1]


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def inputs_hash(args: argparse.Namespace) -> str:
    digest = hashlib.sha256(FORMAT.encode())
    for rel in source_files(args.source):
        digest.update(rel.encode() + b"\0")
        with open(os.path.join(args.source, rel), "rb") as fh:
            digest.update(fh.read())
    with open(args.constraints, "rb") as fh:
        digest.update(fh.read())
    return digest.hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", required=True, help="the agent's source tree (pyproject.toml, src/)")
    p.add_argument("--constraints", required=True, help="name==version pins of every wheel")
    p.add_argument("--cache", required=True, help="cache directory on the controller")
    p.add_argument("--version", default="", help="the version the source must have (empty: any)")
    p.add_argument("--system", required=True, choices=("linux", "darwin"))
    p.add_argument("--machine", required=True, help="platform.machine() of the target")
    p.add_argument("--python", required=True, help="the target's Python, MAJOR.MINOR")
    p.add_argument("--libc", default="", help="the target's glibc version (Linux)")
    p.add_argument("--macos", default="", help="the target's macOS version")
    p.add_argument("--extras", default="", help="agent extras, comma-separated (docker,kubernetes)")
    p.add_argument("--index-url", default="", help="package index for the controller's downloads")
    args = p.parse_args(argv)
    args.extras = sorted({e for e in args.extras.split(",") if e})
    if not re.fullmatch(r"3\.\d+", args.python):
        p.error(f"--python must look like 3.11, not {args.python!r}")
    try:
        args.source = os.path.abspath(args.source)
        version = agent_version(args.source)
        if args.version and args.version != version:
            raise BuildError(
                f"the agent at {args.source} is version {version}, not {args.version} "
                "(point workflow_agent_source_dir at that version)"
            )
        pins = read_pins(args.constraints, marker_env(args.system, args.machine, args.python))
        tag = platform_tags(args.system, args.machine, args.libc, args.macos)[0]
        flavour = "-".join([tag, "cp" + args.python.replace(".", "")] + args.extras)
        key = f"{version}-{flavour}-{inputs_hash(args)}"
        final = os.path.join(args.cache, key)
        built = False
        if not os.path.isfile(os.path.join(final, "manifest.json")):
            os.makedirs(args.cache, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".tmp-", dir=args.cache)
            try:
                build(args, key, version, pins, tmp)
                if os.path.isdir(final):  # a concurrent run finished first; keep its copy
                    shutil.rmtree(tmp)
                else:
                    os.rename(tmp, final)
                    built = True
            finally:
                if os.path.isdir(tmp):
                    shutil.rmtree(tmp)
        with open(os.path.join(final, "manifest.json"), encoding="utf-8") as fh:
            manifest = json.load(fh)
    except BuildError as exc:
        sys.stderr.write(f"build_wheelhouse: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"build_wheelhouse: {exc.filename or ''}: {exc.strerror or exc}\n")
        return 1
    manifest.update(dir=final, built=built)
    print(json.dumps(manifest, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
