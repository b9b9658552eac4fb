"""What the compile cache trusts (runtime/cache.py): records are bytes bound
to their key, never unpickled; a private directory; signed records under
SHAPEJIT_CACHE_SECRET.  Each attack below is tried against a real cache
directory and a fresh process: nothing it planted runs, no result is wrong."""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import diskcache
import pytest

from codegen.artifact import KernelInfo
from codegen.llvm import compile_ir
from runtime.cache import ArtifactCache, CacheWarning, Rejected, pack_record, unpack_record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# two one-kernel functions (each exports its kernel as the same symbol, sj_k0)
SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    from jit import jit
    from runtime.cache import default_cache

    def a(x):
        return x * 2.0 + 1.0

    def b(x):
        return x * 3.0 - 1.0

    x = np.arange(1000, dtype=np.float64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fa, fb = jit(a), jit(b)
        ra, rb = fa(x), fb(x)
        ra, rb = fa(x), fb(x)
    print(json.dumps({"ok_a": bool((ra == a(x)).all()), "ok_b": bool((rb == b(x)).all()),
                      "compiles": fa.stats()["compiles"] + fb.stats()["compiles"],
                      "hits_disk": fa.stats()["cache_hits_disk"] + fb.stats()["cache_hits_disk"],
                      "rejected": default_cache().stats.rejected,
                      "warnings": sorted({str(x.message)[:60] for x in w})}))
""")


def run(tmp_path, cache_dir, **env_extra):
    script = tmp_path / "ab.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHAPEJIT_")}
    env["SHAPEJIT_CALIBRATE"] = "0"  # (no background calibration: conftest.py)
    env.update(SHAPEJIT_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT, SHAPEJIT_TRACE_CACHE="0", **env_extra)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def object_keys(cache_dir) -> dict:
    """{function name: key of its object code}"""
    c = ArtifactCache(str(cache_dir))
    return {e.function: e.key for e in c.entries() if e.kind == "artifact"}


class Planted:
    """A pickle that, if ever unpickled, creates a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickled_record_is_never_unpickled(tmp_path):
    cache_dir, marker = tmp_path / "c", tmp_path / "ran"
    first = run(tmp_path, cache_dir)
    assert first["ok_a"] and first["ok_b"] and first["compiles"] == 2
    keys = object_keys(cache_dir)
    raw = diskcache.Cache(str(cache_dir))  # what a writer of the directory can do: a pickled row
    for key in keys.values():
        raw.set(key, Planted(marker))
    raw.set(("a", "tuple", "key"), Planted(marker))  # a pickled key, too
    raw.close()
    again = run(tmp_path, cache_dir)
    assert again["ok_a"] and again["ok_b"] and again["compiles"] == 2
    assert again["rejected"] == {"pickled": 2}
    listing = subprocess.run([sys.executable, "-m", "jit", "cache"], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, SHAPEJIT_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT), cwd=ROOT)
    assert listing.returncode == 0, listing.stderr
    assert not marker.exists()


def test_swapped_entries_are_misses_never_wrong_results(tmp_path):
    cache_dir = tmp_path / "c"
    run(tmp_path, cache_dir)
    keys = object_keys(cache_dir)
    c = ArtifactCache(str(cache_dir))
    blob_a, blob_b = c._disk.get(keys["a"]), c._disk.get(keys["b"])
    c._disk.set(keys["a"], blob_b)
    c._disk.set(keys["b"], blob_a)
    again = run(tmp_path, cache_dir)
    assert again["ok_a"] and again["ok_b"]
    assert again["compiles"] == 2 and again["rejected"] == {"damaged": 2}
    third = run(tmp_path, cache_dir)  # the recompiled entries replaced them
    assert third["ok_a"] and third["ok_b"] and third["compiles"] == 0 and third["hits_disk"] == 2


def test_object_code_resigned_under_another_key_is_a_miss(tmp_path):
    """What a writer without a secret can do beyond swapping: repack a's
    object code under b's key with a digest recomputed for it.  The record's
    checks pass; the object code lacks the symbol named from b's key, so it
    is never run in b's place."""
    cache_dir = tmp_path / "c"
    run(tmp_path, cache_dir)
    keys = object_keys(cache_dir)
    c = ArtifactCache(str(cache_dir))
    (info_a, code_a), (info_b, code_b) = (unpack_record(keys[f], c._disk.get(keys[f]), None) for f in "ab")
    c._disk.set(keys["b"], pack_record(keys["b"], code_a, info_b, None))
    c._disk.set(keys["a"], pack_record(keys["a"], code_b, info_a, None))
    again = run(tmp_path, cache_dir)
    assert again["ok_a"] and again["ok_b"]
    assert again["compiles"] == 2 and again["rejected"] == {"damaged": 2}


def _object_calling_system(marker) -> bytes:
    """Object code exporting the kernel symbol a jitted function calls, whose
    body runs a shell command."""
    cmd = f"touch {marker}".encode() + b"\0"
    text = "".join("\\%02X" % b for b in cmd)
    ir = textwrap.dedent(f"""
        @cmd = private constant [{len(cmd)} x i8] c"{text}"
        declare i32 @system(i8*)
        define void @sj_k0(i64 %lo, i64 %hi) {{
          %p = getelementptr [{len(cmd)} x i8], [{len(cmd)} x i8]* @cmd, i64 0, i64 0
          %r = call i32 @system(i8* %p)
          ret void
        }}
    """)
    return compile_ir(ir, [KernelInfo("sj_k0", 0, 0, 0)]).to_bytes()


def test_forged_object_code_never_runs_with_a_secret(tmp_path):
    """With SHAPEJIT_CACHE_SECRET, a forger who can write the directory but
    does not know the secret: neither a sha256 record nor one signed under
    another secret is loaded.  Without a secret, a record in the right form
    with a recomputed sha256 is indistinguishable from ours: the directory's
    permissions (test_private_directory) are that case's protection."""
    cache_dir, marker = tmp_path / "c", tmp_path / "ran"
    env = {"SHAPEJIT_CACHE_SECRET": "s3cret"}
    run(tmp_path, cache_dir, **env)
    keys = object_keys(cache_dir)
    evil = _object_calling_system(marker)
    c = ArtifactCache(str(cache_dir))
    info = {"function": "a", "signature": "", "time": 0.0, "version": "", "kind": "artifact"}
    c._disk.set(keys["a"], pack_record(keys["a"], evil, info, None))
    c._disk.set(keys["b"], pack_record(keys["b"], evil, info, b"another secret"))
    again = run(tmp_path, cache_dir, **env)
    assert again["ok_a"] and again["ok_b"] and again["compiles"] == 2
    assert again["rejected"] == {"unsigned": 1, "bad_signature": 1}
    assert any("not loaded" in w for w in again["warnings"])
    assert not marker.exists()


def test_signed_records_round_trip_and_bind_their_key():
    info = {"kind": "artifact"}
    rec = pack_record("k1", b"payload", info, b"secret")
    assert unpack_record("k1", rec, b"secret") == (info, b"payload")
    for key, secret, reason in [("k2", b"secret", "bad_signature"), ("k1", b"other", "bad_signature"),
                                ("k1", None, "unverifiable")]:
        with pytest.raises(Rejected) as e:
            unpack_record(key, rec, secret)
        assert e.value.reason == reason
    plain = pack_record("k1", b"payload", info, None)
    assert unpack_record("k1", plain, None) == (info, b"payload")
    with pytest.raises(Rejected, match="unsigned"):
        unpack_record("k1", plain, b"secret")
    with pytest.raises(Rejected, match="damaged"):
        unpack_record("k2", plain, None)
    for bad in [plain[:10], plain[:-1], plain + b"x", b"", 42, bytes(len(plain))]:
        with pytest.raises(Rejected):
            unpack_record("k1", bad, None)


def test_an_unverifiable_record_is_left_for_the_process_with_the_secret(tmp_path):
    c = ArtifactCache(str(tmp_path / "c"))
    c._disk.set("k", pack_record("k", b"code", {}, b"secret"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        assert c.get("k") == (None, None)
    assert c.stats.rejected == {"unverifiable": 1}
    assert c._disk.get("k") is not None  # not dropped


def test_private_directory(tmp_path):
    old = os.umask(0)
    try:
        c = ArtifactCache(str(tmp_path / "new" / "cache"))
    finally:
        os.umask(old)
    assert c.on_disk
    assert os.stat(tmp_path / "new" / "cache").st_mode & 0o777 == 0o700
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.warns(CacheWarning, match="writable by group and others"):
        assert not ArtifactCache(str(open_dir)).on_disk


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_directory_owned_by_another_user_is_refused(tmp_path):
    """A directory another local user created (and filled) where this user's
    cache would be: refused, the call runs from memory, nothing of theirs
    is loaded."""
    cache_dir = tmp_path / "theirs"
    run(tmp_path, cache_dir)  # "their" cache, with real entries
    for root, dirs, files in os.walk(cache_dir):
        for name in dirs + files:
            os.chown(os.path.join(root, name), 4321, 4321)
    os.chown(cache_dir, 4321, 4321)
    again = run(tmp_path, cache_dir)
    assert again["ok_a"] and again["ok_b"] and again["compiles"] == 2 and again["hits_disk"] == 0
    assert any("compile cache directory" in w for w in again["warnings"])
