// The envelope EVCache 5.x stores under a hashed key, written for memgroup's
// interop test from its documented shape (class name, serialVersionUID and
// fields are what make the Java serialization match): a Serializable with
// default serialization.
package com.netflix.evcache.pool;

public class EVCacheValue implements java.io.Serializable {
    private static final long serialVersionUID = 3182483105524224448L;

    private final String key;
    private final byte[] value;
    private final int flags;
    private final long ttl;
    private final long createTime;

    public EVCacheValue(String key, byte[] value, int flags, long ttl, long createTime) {
        this.key = key;
        this.value = value;
        this.flags = flags;
        this.ttl = ttl;
        this.createTime = createTime;
    }

    public String getKey() { return key; }
    public byte[] getValue() { return value; }
    public int getFlags() { return flags; }
    public long getTTL() { return ttl; }
    public long getCreateTimeUTC() { return createTime; }
}
