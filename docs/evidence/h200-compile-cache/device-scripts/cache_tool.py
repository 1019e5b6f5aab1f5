"""vfleet's compile-cache step on one machine with no ssh, rsync or systemd (the device): the
same key (vfleet/roles/compile_cache/key.py host_key), the same entry choice (stored.py) and the
same pack and install commands (files.py), run with bash; `cp -a` stands in for the rsync between
the source host and the other host.

    python3 cache_tool.py pack    INV HOST STARTED_AT   pack what the unit compiled since STARTED_AT
    python3 cache_tool.py move    INV HOST WIRE         the export onto the wire, the host's cache
                                                        dir wiped, the wire at the staging path
    python3 cache_tool.py stage   INV HOST WIRE         the same, from a wire an earlier move left
    python3 cache_tool.py install INV HOST              verify, rename each entry into place
    python3 cache_tool.py compare INV HOST KEY=VALUE... the line of a host whose key differs
"""
import os, shutil, subprocess, sys, time

from vfleet.cli.common import load
from vfleet.cli.options import TaskOptions
from vfleet.engine.facts import LinkFact
from vfleet.roles.compile_cache.facts import GpuModel, model_identity
from vfleet.roles.compile_cache.files import CacheFiles, install_command, list_command, pack_command, parse_entries, read_key_command
from vfleet.roles.compile_cache.key import difference, host_key, skip_line
from vfleet.roles.compile_cache.stored import StoredCache, choose_entries, parse_stored


def sh(cmd, stdin=None):
    r = subprocess.run(["bash", "-c", cmd], input=stdin, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"command failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return r.stdout


def key(inv, host, sets=()):
    cfg = load(TaskOptions(inventory=inv, set_=tuple(sets))).config(host)
    gpu = GpuModel().process(sh(GpuModel().command()).splitlines())
    link = LinkFact(cfg.model_path).process(sh(LinkFact(cfg.model_path).command()).splitlines())
    return cfg, host_key(cfg, gpu_model=gpu, model=model_identity(cfg, link))


def main(cmd, inv, host, *rest):
    cfg, k = key(inv, host)
    files = CacheFiles.of(cfg)
    if cmd == "pack":
        t = time.time()
        entries = parse_entries(sh(list_command(files)).splitlines())
        stored = parse_stored(sh(read_key_command(files)))
        chosen, why = choose_entries(entries, int(rest[0]), stored, k)
        size = sh(pack_command(files, k.digest, chosen), stdin=StoredCache(k, tuple(chosen), host).to_json()).strip()
        print(f"key {k.digest[:12]} ({k.gpu_model}, vLLM {k.vllm_version}); entries {chosen} ({why}); "
              f"export {files.export(k.digest)}: {size} bytes; packed in {time.time() - t:.1f}s")
    elif cmd in ("move", "stage"):                        # stage: a wire kept from an earlier move
        wire = rest[0]
        if cmd == "move":
            shutil.rmtree(wire, ignore_errors=True)
            sh(f"cp -a -- {files.export(k.digest)} {wire}")
        shutil.rmtree(cfg.cache_dir, ignore_errors=True)                      # the other host: nothing of the first one's cache
        os.makedirs(os.path.dirname(files.staging(k.digest)))
        sh(f"cp -a -- {wire} {files.staging(k.digest)}")
        print(f"wiped {cfg.cache_dir}; the export is at {files.staging(k.digest)}")
    elif cmd == "install":
        t = time.time()
        out = sh(install_command(files, k.digest, list(parse_stored(open(files.staging(k.digest) + "/key.json").read()).entries),
                                 None, None))
        print(" ".join(out.split()), f"in {time.time() - t:.1f}s; key file {files.key_file}")
    elif cmd == "compare":
        _, other = key(inv, host, rest)
        field, detail = difference(k, other, have_is=host, want_is="on the other host") or ("", "keys equal")
        print(f"with {' '.join(rest)}: key {other.digest[:12]} vs {k.digest[:12]}:",
              skip_line("other", host, field, detail) if field else detail)


if __name__ == "__main__":
    main(*sys.argv[1:])
