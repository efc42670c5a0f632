# The python-memcached side of memgroup's interop test (tests/integration/interop.rs).
# `python harness.py write|read h:p,h:p MIN_COMPRESS_LEN PREFIX`: writes every
# case with that min_compress_len, or reads every case and prints
# "name<TAB>ok" or a mismatch.
import sys

import memcache

CASES = [
    ("string", "héllo wörld"),
    ("bigstring", "lorem ipsum " * 2000),
    ("bytes", b"\x00\x01\x02\xff"),
    ("int", 42),
    ("intneg", -7),
    ("bigint", 10 ** 30),
    ("bool", True),
    ("boolfalse", False),
    ("float", 2.5),
    ("floatneg", -0.1),
]

mode, servers, min_compress_len, prefix = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
client = memcache.Client(servers)
for name, value in CASES:
    key = prefix + name
    if mode == "write":
        if not client.set(key, value, min_compress_len=min_compress_len):
            raise SystemExit("set %s failed" % key)
    else:
        got = client.get(key)
        same = type(got) is type(value) and got == value
        print("%s\t%s" % (name, "ok" if same else "MISMATCH %r" % (got,)))
