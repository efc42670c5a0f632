// The spymemcached side of memgroup's interop test (tests/integration/interop.rs).
// `java Harness write|read "h:p h:p …" THRESHOLD PREFIX`: writes every case
// with a SerializingTranscoder of that compression threshold through a ketama
// client, or reads every case and prints "name<TAB>ok" or a mismatch.
import java.util.Arrays;
import java.util.Date;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.KetamaConnectionFactory;
import net.spy.memcached.MemcachedClient;
import net.spy.memcached.transcoders.SerializingTranscoder;

public class Harness {
    static String repeat(String s, int n) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) b.append(s);
        return b.toString();
    }

    static byte[] bytes(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte) (i % 7);
        return b;
    }

    static final Object[][] CASES = {
        {"string", "héllo wörld"},
        {"bigstring", repeat("lorem ipsum ", 2000)},
        {"json", "{\"k\":\"" + repeat("v", 300) + "\"}"},
        {"bool", Boolean.TRUE},
        {"boolfalse", Boolean.FALSE},
        {"int", 42},
        {"intzero", 0},
        {"intneg", -1},
        {"long", 1234567890123L},
        {"longneg", -5L},
        {"date", new Date(1700000000000L)},
        {"byte", (byte) -7},
        {"float", 1.5f},
        {"double", -2.25},
        {"bytes", new byte[] {0, 1, 2, (byte) 255}},
        {"bigbytes", bytes(40000)},
    };

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        SerializingTranscoder t = new SerializingTranscoder();
        t.setCompressionThreshold(Integer.parseInt(args[2]));
        String prefix = args[3];
        MemcachedClient c = new MemcachedClient(new KetamaConnectionFactory(), AddrUtil.getAddresses(args[1]));
        try {
            // spymemcached connects in the background, and the ketama
            // factory's failure mode redistributes an operation whose node
            // is not connected yet to the next node on the ring: on a loaded
            // machine the first key then went to the wrong server (a read
            // of "string" gave null). Asking every node for its version
            // waits until each one is connected.
            c.getVersions();
            for (Object[] kase : CASES) {
                String key = prefix + kase[0];
                if (mode.equals("write")) {
                    if (!c.set(key, 0, kase[1], t).get()) throw new RuntimeException("set " + key);
                } else {
                    Object got = c.get(key, t);
                    boolean same = got != null && (kase[1] instanceof byte[]
                        ? got instanceof byte[] && Arrays.equals((byte[]) kase[1], (byte[]) got)
                        : kase[1].equals(got));
                    System.out.println(kase[0] + "\t" + (same ? "ok" : "MISMATCH " + (got == null ? "null" : got.getClass().getName() + " " + got)));
                }
            }
        } finally {
            c.shutdown();
        }
    }
}
