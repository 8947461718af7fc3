// A process of the fault suite's rmi-chain (bench/localize/sut/rmi_chain.py):
//   java RmiChain store REGISTRY_PORT OBJECT_PORT
//   java RmiChain front REGISTRY_PORT OBJECT_PORT
//   java RmiChain client NAME REGISTRY_PORT STEPS PAUSE_MS DEADLINE_S
// The store and the front are remote objects exported on fixed ports and bound in an
// rmiregistry (JRMP: a connection per call in flight, a thread per connection).
import java.rmi.Remote;
import java.rmi.RemoteException;
import java.rmi.registry.LocateRegistry;
import java.rmi.registry.Registry;
import java.rmi.server.UnicastRemoteObject;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

public class RmiChain {
    /** The remote interface of both servers: put answers "key length sha1", get the value. */
    public interface Kv extends Remote {
        String put(String key, byte[] value) throws RemoteException;

        byte[] get(String key) throws RemoteException;
    }

    static void say(String s) {
        System.err.println("systems: " + s);
        System.err.flush();
    }

    static String sha1(byte[] v) {
        try {
            StringBuilder b = new StringBuilder();
            for (byte x : MessageDigest.getInstance("SHA-1").digest(v)) {
                b.append(String.format("%02x", x & 0xff));
            }
            return b.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static final AtomicLong SERVED = new AtomicLong();
    static final AtomicLong FAILED = new AtomicLong();

    /** The store: a map. */
    public static class Store implements Kv {
        private final ConcurrentHashMap<String, byte[]> data = new ConcurrentHashMap<>();

        public String put(String key, byte[] value) {
            data.put(key, value);
            SERVED.incrementAndGet();
            return key + " " + value.length + " " + sha1(value);
        }

        public byte[] get(String key) throws RemoteException {
            SERVED.incrementAndGet();
            byte[] v = data.get(key);
            if (v == null) {
                throw new RemoteException("no key " + key);
            }
            return v;
        }
    }

    /** The front: every call forwarded to the store, looked up again after a failure. */
    public static class Front implements Kv {
        private final int registryPort;
        private volatile Kv store;

        Front(int registryPort) {
            this.registryPort = registryPort;
        }

        private Kv store() throws Exception {
            Kv s = store;
            if (s == null) {
                s = (Kv) LocateRegistry.getRegistry("127.0.0.1", registryPort).lookup("store");
                store = s;
            }
            return s;
        }

        private RemoteException failed(String what, Exception e) {
            store = null;
            FAILED.incrementAndGet();
            String m = "store " + what + ": " + e;
            say("rmi front: " + (m.length() > 200 ? m.substring(0, 200) : m));
            return new RemoteException(m.length() > 200 ? m.substring(0, 200) : m);
        }

        public String put(String key, byte[] value) throws RemoteException {
            String want = key + " " + value.length + " " + sha1(value);
            String got;
            try {
                got = store().put(key, value);
            } catch (Exception e) {
                throw failed("put " + key, e);
            }
            if (!want.equals(got)) {
                throw failed("put " + key, new IllegalStateException("wrong answer " + got));
            }
            SERVED.incrementAndGet();
            return got;
        }

        public byte[] get(String key) throws RemoteException {
            try {
                byte[] v = store().get(key);
                SERVED.incrementAndGet();
                return v;
            } catch (Exception e) {
                throw failed("get " + key, e);
            }
        }
    }

    static byte[] value(int k) throws Exception {
        byte[] seed = MessageDigest.getInstance("SHA-1").digest(("rmi-" + k).getBytes("UTF-8"));
        int n = 300 + (k * 7919) % 9000;
        byte[] v = new byte[n];
        for (int i = 0; i < n; i++) {
            v[i] = seed[i % seed.length];
        }
        return v;
    }

    static void client(String name, int registryPort, int steps, long pauseMs, double deadlineS) throws Exception {
        int ok = 0;
        int failed = 0;
        long stop = System.nanoTime() + (long) (deadlineS * 1e9);
        Kv front = null;
        for (int i = 0; i < steps; i++) {
            if (System.nanoTime() > stop) {
                say("rmi client " + name + ": workload deadline (" + Math.round(deadlineS) + " s) reached after " + i
                    + " of " + steps + " steps");
                break;
            }
            int k = 2 * i + Integer.parseInt(name);
            byte[] v = value(k);
            try {
                if (front == null) {
                    front = (Kv) LocateRegistry.getRegistry("127.0.0.1", registryPort).lookup("front");
                }
                String r = front.put(Integer.toString(k), v);
                String want = k + " " + v.length + " " + sha1(v);
                if (!want.equals(r)) {
                    throw new IllegalStateException("put " + k + ": wrong answer " + r);
                }
                byte[] got = front.get(Integer.toString(k));
                if (got.length != v.length || !Arrays.equals(sha1(got).getBytes(), sha1(v).getBytes())) {
                    throw new IllegalStateException("get " + k + ": " + got.length + " bytes, wrong length or SHA-1");
                }
                ok++;
            } catch (Exception e) {
                failed++;
                String m = e.toString();
                say("rmi client " + name + ": request failed: " + (m.length() > 200 ? m.substring(0, 200) : m));
                front = null;
            }
            Thread.sleep(pauseMs);
        }
        say("rmi client " + name + ": " + ok + "/" + steps + " steps ok, " + failed + " failed");
    }

    public static void main(String[] a) throws Exception {
        String role = a[0];
        if (role.equals("client")) {
            client(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]), Long.parseLong(a[4]), Double.parseDouble(a[5]));
            return;
        }
        int registryPort = Integer.parseInt(a[1]);
        int objectPort = Integer.parseInt(a[2]);
        Kv obj = role.equals("store") ? new Store() : new Front(registryPort);
        Kv stub = (Kv) UnicastRemoteObject.exportObject(obj, objectPort);
        Registry reg = LocateRegistry.getRegistry("127.0.0.1", registryPort);
        reg.rebind(role, stub);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (role.equals("store")) {
                say("rmi store: " + SERVED.get() + " calls served (told to stop)");
            } else {
                say("rmi front: " + SERVED.get() + " calls forwarded, " + FAILED.get() + " failed (told to stop)");
            }
        }));
        say("rmi " + role + ": bound in the registry, listening on " + objectPort);
        Thread.currentThread().join();
    }
}
