// The EVCache side of memgroup's hashed-key interop test
// (tests/integration/evcache_keys.rs), written from EVCache 5.x's documented
// behaviour: the canonical key hashed with Guava, encoded as base64 without
// padding, the value's CachedData wrapped in an EVCacheValue stored with a
// never-compressing SerializingTranscoder (flags 1), routed by ketama on the
// hashed key through spymemcached.
//
// `java EvcacheHarness MODE "h:p h:p …" ALGO DIGEST_BYTES HASH_LENGTH SCOPE PREFIX`
//   MODE  keys (each case's wire key for every algorithm, with the digest
//         and length caps 0/0, 4/0, 0/10, in both scopes; the other arguments
//         but PREFIX ignored) | write | read (print "i<TAB>ok" or a mismatch
//         per case)
//   SCOPE every | auto (keys over 200 Java characters)
import com.google.common.hash.HashFunction;
import com.google.common.hash.Hashing;
import com.netflix.evcache.pool.EVCacheValue;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.CachedData;
import net.spy.memcached.KetamaConnectionFactory;
import net.spy.memcached.MemcachedClient;
import net.spy.memcached.transcoders.SerializingTranscoder;

public class EvcacheHarness {
    static String repeat(String s, int n) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) b.append(s);
        return b.toString();
    }

    /// The canonical keys of the cases: PREFIX, then the key; the long ones
    /// sized so the canonical key is exactly that many Java characters.
    static String[] cases(String prefix) {
        int p = prefix.length();
        return new String[] {
            prefix + "plain",
            prefix + "h\u00e9llo-w\u00f6rld-\u043a\u043b\u044e\u0447",
            prefix + "emoji-\ud83d\ude00-\ud834\udd1e",
            prefix + "nul\u0000" + repeat("n", 200),
            prefix + repeat("x", 199 - p),
            prefix + repeat("y", 200 - p),
            prefix + repeat("z", 201 - p),
            prefix + repeat("\u00e9", 201 - p),
            prefix + repeat("\ud83d\ude00", 100) + "k",
            prefix + repeat("w", 1000 - p),
        };
    }

    static String valueOf(int i) {
        return i == 1 ? repeat("a long value, compressed inside the envelope. ", 20) : "value " + i + " \u00e9";
    }

    static HashFunction function(String algo) {
        switch (algo.toLowerCase()) {
            case "siphash24": return Hashing.sipHash24();
            case "sha1": return Hashing.sha1();
            case "sha256": return Hashing.sha256();
            case "murmur3": return Hashing.murmur3_128();
            case "crc32": return Hashing.crc32();
            case "adler32": return Hashing.adler32();
            default: return Hashing.md5();
        }
    }

    static String hash(String canonical, String algo, int digestBytes, int hashLength) {
        byte[] digest = function(algo).hashString(canonical, StandardCharsets.UTF_8).asBytes();
        if (digestBytes > 0 && digestBytes < digest.length) digest = Arrays.copyOf(digest, digestBytes);
        String key = Base64.getEncoder().withoutPadding().encodeToString(digest);
        if (hashLength > 0 && hashLength < key.length()) key = key.substring(0, hashLength);
        return key;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String algo = args[2];
        int digestBytes = Integer.parseInt(args[3]);
        int hashLength = Integer.parseInt(args[4]);
        boolean every = args[5].equals("every");
        String prefix = args.length > 6 ? args[6] : "";
        String[] cases = cases(prefix);
        if (mode.equals("keys")) {
            String[] algos = {"siphash24", "md5", "sha1", "sha256", "murmur3", "crc32", "adler32"};
            int[][] caps = {{0, 0}, {4, 0}, {0, 10}};
            for (String a : algos) for (int[] cap : caps) for (String scope : new String[] {"every", "auto"})
                for (int i = 0; i < cases.length; i++) {
                    boolean hashed = scope.equals("every") || cases[i].length() > 200;
                    String w = hashed ? hash(cases[i], a, cap[0], cap[1]) : "-";
                    System.out.println(a + "\t" + cap[0] + "\t" + cap[1] + "\t" + scope + "\t" + i + "\t" + w);
                }
            return;
        }
        String[] wire = new String[cases.length];
        for (int i = 0; i < cases.length; i++) {
            boolean hashed = every || cases[i].length() > 200;
            wire[i] = hashed ? hash(cases[i], algo, digestBytes, hashLength) : null;
        }
        SerializingTranscoder inner = new SerializingTranscoder();
        inner.setCompressionThreshold(120); // EVCache's default
        SerializingTranscoder envelope = new SerializingTranscoder();
        envelope.setCompressionThreshold(Integer.MAX_VALUE); // as EVCacheImpl sets it
        MemcachedClient c = new MemcachedClient(new KetamaConnectionFactory(), AddrUtil.getAddresses(args[1]));
        try {
            c.getVersions(); // every node connected before the first key (see Harness.java)
            for (int i = 0; i < cases.length; i++) {
                String key = wire[i] == null ? cases[i] : wire[i];
                if (mode.equals("write")) {
                    if (wire[i] == null) {
                        if (!c.set(key, 0, valueOf(i), inner).get()) throw new RuntimeException("set " + i);
                    } else {
                        CachedData cd = inner.encode(valueOf(i));
                        EVCacheValue v = new EVCacheValue(cases[i], cd.getData(), cd.getFlags(), 0, System.currentTimeMillis());
                        if (!c.set(key, 0, v, envelope).get()) throw new RuntimeException("set " + i);
                    }
                } else if (mode.equals("read")) {
                    String got;
                    if (wire[i] == null) {
                        Object o = c.get(key, inner);
                        got = o == null ? null : o.toString();
                    } else {
                        Object o = c.get(key, envelope);
                        if (!(o instanceof EVCacheValue)) {
                            System.out.println(i + "\tNOT AN EVCacheValue " + (o == null ? "null" : o.getClass().getName()));
                            continue;
                        }
                        EVCacheValue v = (EVCacheValue) o;
                        if (!v.getKey().equals(cases[i])) {
                            System.out.println(i + "\tCOLLISION " + v.getKey());
                            continue;
                        }
                        got = (String) inner.decode(new CachedData(v.getFlags(), v.getValue(), CachedData.MAX_SIZE));
                    }
                    System.out.println(i + "\t" + (valueOf(i).equals(got) ? "ok" : "MISMATCH " + got));
                }
            }
        } finally {
            c.shutdown();
        }
    }
}
