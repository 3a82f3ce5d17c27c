"""Install one version of the agent on a host from the environment archive the controller built
(build_wheelhouse.py), run there as `python -c <this file> <json>` with the host's Python.

No pip and no resolver on the host: the archive's sha256 is checked against the controller's,
it is unpacked into a fresh venv (made without pip) beside the version's directory, every file
is checked against the archive's list of sha256s, the console scripts are written (their
shebang names this venv), and the directory replaces the version's at the end, its record of
the wheelhouse (.wheelhouse) written last: a run that stops half-way leaves the old one, or
none, and the next run installs again. Prints one JSON line; a problem is one line on stderr
(exit 1).

The argument: {"archive", "sha256", "venv", "key", "check"}. With "check" (check mode) it
reports what it would do and changes nothing.
"""

import compileall
import configparser
import hashlib
import json
import os
import py_compile
import shutil
import sys
import tarfile
import venv

ENV_MANIFEST = ".wfa-env.json"  # build_wheelhouse.py's
SCRIPT = """#!%s
import sys
from %s import %s
if __name__ == "__main__":
    sys.exit(%s())
"""


class Problem(Exception):
    pass


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def unpack(archive, dest):
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            name = os.path.normpath(member.name)
            if not (member.isfile() or member.isdir()) or name.startswith(("/", "..")):
                raise Problem(f"{archive}: unexpected member {member.name}")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python before 3.10.12/3.11.4: the members were checked above
            tar.extractall(dest)  # noqa: S202


def console_scripts(site, bindir, python):
    """What pip writes for each distribution's console_scripts entry points."""
    for name in sorted(os.listdir(site)):
        path = os.path.join(site, name, "entry_points.txt")
        if not name.endswith(".dist-info") or not os.path.isfile(path):
            continue
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str
        parser.read(path, encoding="utf-8")
        if not parser.has_section("console_scripts"):
            continue
        for script, target in parser.items("console_scripts"):
            module, _sep, attr = target.strip().partition(":")
            dest = os.path.join(bindir, script.strip())
            with open(dest, "w", encoding="utf-8") as fh:
                fh.write(SCRIPT % (python, module.strip(), attr.split(".")[0].strip(), attr))
            os.chmod(dest, 0o755)  # noqa: S103 - a command, as pip makes it


def install(args):
    target = args["venv"]
    if not os.path.isfile(args["archive"]):
        if args.get("check"):
            return {"changed": True}  # check mode on a host that has no archive yet
        raise Problem(f"{args['archive']} does not exist")
    got = sha256(args["archive"])
    if got != args["sha256"]:
        raise Problem(f"{args['archive']}: sha256 {got} is not the controller's {args['sha256']}")
    if args.get("check"):
        return {"changed": True}
    os.umask(0o022)
    work = target + ".partial"
    shutil.rmtree(work, ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(work)
    unpack(args["archive"], work)
    with open(os.path.join(work, ENV_MANIFEST), encoding="utf-8") as fh:
        listing = json.load(fh)
    want = "{}.{}".format(*sys.version_info[:2])
    if listing["python"] != want:
        raise Problem(f"the archive is for Python {listing['python']}, this host's is {want}")
    for name, digest in sorted(listing["files"].items()):
        if sha256(os.path.join(work, name)) != digest:
            raise Problem(f"{name}: sha256 differs from the archive's list after unpacking")
    site = os.path.join(work, "lib", "python" + want, "site-packages")
    if listing["compiled"] != sys.implementation.cache_tag:
        compileall.compile_dir(
            site, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
        )
    console_scripts(site, os.path.join(work, "bin"), os.path.join(target, "bin", "python"))
    with open(os.path.join(work, ".wheelhouse"), "w", encoding="utf-8") as fh:
        fh.write(args["key"])
    shutil.rmtree(target, ignore_errors=True)
    os.rename(work, target)
    return {"changed": True}


def main():
    try:
        print(json.dumps(install(json.loads(sys.argv[1]))))
    except (Problem, OSError, ValueError, KeyError, tarfile.TarError) as exc:
        sys.stderr.write(f"install_env: {exc}\n")
        sys.exit(1)


main()
