// A process of the fault suite's netty-chain (bench/localize/sut/netty_chain.py), on Netty 4.1
// (Debian libnetty-java), NIO event loops only:
//   java NettyChain backend PORT          a key-value store behind length-prefixed frames
//   java NettyChain front PORT BACKEND    an HTTP front forwarding every request to it
//
// Frames (both directions): a 4-byte length, then the body. A request's body: op (1 = put,
// 2 = get), a 4-byte request id, a 2-byte key length, the key, then (put) the value. An
// answer's body: status (0 = ok, 1 = no such key, 2 = bad request), the request's id, then
// (put) the stored length (4 bytes) and the value's SHA-1 (20 bytes) or (get) the value.

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.pool.AbstractChannelPoolHandler;
import io.netty.channel.pool.ChannelHealthChecker;
import io.netty.channel.pool.FixedChannelPool;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.LengthFieldPrepender;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.AttributeKey;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.Promise;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

public final class NettyChain {
    static final int MAX_FRAME = 1 << 20;
    static final long CALL_MS = 1000;
    static final AtomicLong served = new AtomicLong();
    static final AtomicLong failed = new AtomicLong();

    static byte[] sha1(byte[] b) {
        try {
            return MessageDigest.getInstance("SHA-1").digest(b);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }

    static void framing(Channel ch) {
        ch.pipeline().addLast(new LengthFieldBasedFrameDecoder(MAX_FRAME, 0, 4, 0, 4));
        ch.pipeline().addLast(new LengthFieldPrepender(4));
    }

    // ---- backend ------------------------------------------------------------------------

    static final class Backend extends SimpleChannelInboundHandler<ByteBuf> {
        static final ConcurrentHashMap<String, byte[]> DATA = new ConcurrentHashMap<>();

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf in) {
            ByteBuf out = ctx.alloc().buffer();
            if (in.readableBytes() < 7) {
                failed.incrementAndGet();
                out.writeByte(2).writeInt(0);
                ctx.writeAndFlush(out);
                return;
            }
            int op = in.readByte();
            int id = in.readInt();
            int klen = in.readShort();
            if (klen < 0 || klen > in.readableBytes() || (op != 1 && op != 2)) {
                failed.incrementAndGet();
                out.writeByte(2).writeInt(id);
                ctx.writeAndFlush(out);
                return;
            }
            byte[] k = new byte[klen];
            in.readBytes(k);
            String key = new String(k, StandardCharsets.UTF_8);
            if (op == 1) {
                byte[] v = new byte[in.readableBytes()];
                in.readBytes(v);
                DATA.put(key, v);
                out.writeByte(0).writeInt(id).writeInt(v.length).writeBytes(sha1(v));
            } else {
                byte[] v = DATA.get(key);
                if (v == null) {
                    out.writeByte(1).writeInt(id);
                } else {
                    out.writeByte(0).writeInt(id).writeBytes(v);
                }
            }
            served.incrementAndGet();
            ctx.writeAndFlush(out);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            failed.incrementAndGet();
            System.err.println("backend: connection dropped: " + cause);
            ctx.close();
        }
    }

    // ---- front --------------------------------------------------------------------------

    static final AttributeKey<Call> PENDING = AttributeKey.valueOf("pending");
    static final AtomicInteger ids = new AtomicInteger();
    static FixedChannelPool pool;

    /** One call on a pooled backend connection: its id and the promise of its answer. */
    static final class Call {
        final int id;
        final Promise<ByteBuf> answer;

        Call(int id, Promise<ByteBuf> answer) {
            this.id = id;
            this.answer = answer;
        }
    }

    /** The handler of a pooled backend connection: completes the call waiting on it. */
    static final class BackendLink extends SimpleChannelInboundHandler<ByteBuf> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf in) {
            Call c = ctx.channel().attr(PENDING).getAndSet(null);
            if (c == null) {
                System.err.println("front: an answer nobody waits for: connection closed");
                ctx.close();
                return;
            }
            c.answer.trySuccess(in.retain());
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            Call c = ctx.channel().attr(PENDING).getAndSet(null);
            if (c != null) {
                c.answer.tryFailure(new IllegalStateException("backend closed the connection"));
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            Call c = ctx.channel().attr(PENDING).getAndSet(null);
            if (c != null) {
                c.answer.tryFailure(cause);
            }
            ctx.close();
        }
    }

    /** Sends one request frame on a pooled connection; the promise holds the answer's body
     * after its status and id (or fails after CALL_MS, the connection closed). */
    static Promise<ByteBuf> call(Channel client, int op, String key, byte[] value) {
        Promise<ByteBuf> result = client.eventLoop().newPromise();
        Future<Channel> acquired = pool.acquire();
        acquired.addListener(f -> {
            if (!f.isSuccess()) {
                result.tryFailure(f.cause());
                return;
            }
            Channel ch = (Channel) f.getNow();
            int id = ids.incrementAndGet();
            Promise<ByteBuf> answer = ch.eventLoop().newPromise();
            ch.attr(PENDING).set(new Call(id, answer));
            byte[] k = key.getBytes(StandardCharsets.UTF_8);
            ByteBuf req = ch.alloc().buffer(7 + k.length + (value == null ? 0 : value.length));
            req.writeByte(op).writeInt(id).writeShort(k.length).writeBytes(k);
            if (value != null) {
                req.writeBytes(value);
            }
            ch.writeAndFlush(req).addListener((ChannelFutureListener) w -> {
                if (!w.isSuccess()) {
                    answer.tryFailure(w.cause());
                }
            });
            ch.eventLoop().schedule(() -> {
                if (answer.tryFailure(new IllegalStateException("no answer within " + CALL_MS + " ms"))) {
                    ch.attr(PENDING).set(null);
                }
            }, CALL_MS, TimeUnit.MILLISECONDS);
            answer.addListener(a -> {
                if (a.isSuccess()) {
                    ByteBuf body = (ByteBuf) a.getNow();
                    int status = body.readableBytes() >= 5 ? body.readByte() : -1;
                    int got = status >= 0 ? body.readInt() : -1;
                    if (got != id) {
                        ch.close();
                    }
                    pool.release(ch);
                    if (got != id) {
                        body.release();
                        result.tryFailure(new IllegalStateException("answer to " + got + ", not " + id));
                    } else if (status != 0) {
                        body.release();
                        result.tryFailure(new IllegalStateException("backend status " + status));
                    } else {
                        result.trySuccess(body);
                    }
                } else {
                    ch.close();
                    pool.release(ch);
                    result.tryFailure(a.cause());
                }
            });
        });
        return result;
    }

    static final class Front extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            boolean keep = HttpUtil.isKeepAlive(req);
            String uri = req.uri();
            if (!uri.startsWith("/item/") || uri.length() <= 6
                    || !(req.method().equals(HttpMethod.PUT) || req.method().equals(HttpMethod.GET))) {
                reply(ctx, keep, HttpResponseStatus.NOT_FOUND, "no such resource\n".getBytes(StandardCharsets.UTF_8));
                return;
            }
            String key = uri.substring(6);
            boolean put = req.method().equals(HttpMethod.PUT);
            byte[] value = null;
            if (put) {
                value = new byte[req.content().readableBytes()];
                req.content().readBytes(value);
            }
            call(ctx.channel(), put ? 1 : 2, key, value).addListener(f -> {
                if (!f.isSuccess()) {
                    failed.incrementAndGet();
                    String why = "backend: " + f.cause() + "\n";
                    reply(ctx, keep, HttpResponseStatus.BAD_GATEWAY, why.getBytes(StandardCharsets.UTF_8));
                    return;
                }
                ByteBuf body = (ByteBuf) f.getNow();
                byte[] out;
                try {
                    if (put) {
                        int len = body.readInt();
                        byte[] digest = new byte[20];
                        body.readBytes(digest);
                        out = ("stored " + key + " " + len + " " + hex(digest) + "\n").getBytes(StandardCharsets.UTF_8);
                    } else {
                        out = new byte[body.readableBytes()];
                        body.readBytes(out);
                    }
                } catch (RuntimeException e) {
                    failed.incrementAndGet();
                    reply(ctx, keep, HttpResponseStatus.BAD_GATEWAY, ("bad answer: " + e + "\n").getBytes(StandardCharsets.UTF_8));
                    return;
                } finally {
                    body.release();
                }
                served.incrementAndGet();
                reply(ctx, keep, HttpResponseStatus.OK, out);
            });
        }

        static void reply(ChannelHandlerContext ctx, boolean keep, HttpResponseStatus status, byte[] body) {
            FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status, Unpooled.wrappedBuffer(body));
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/octet-stream");
            r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, body.length);
            if (keep) {
                r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.KEEP_ALIVE);
                ctx.writeAndFlush(r);
            } else {
                ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            System.err.println("front: client connection dropped: " + cause);
            ctx.close();
        }
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        int port = Integer.parseInt(args[1]);
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup(2);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.println("systems: netty " + role + ": "
                + served.get() + " requests served, " + failed.get() + " failed (told to stop)")));
        ServerBootstrap sb = new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .childOption(ChannelOption.TCP_NODELAY, true);
        if (role.equals("backend")) {
            sb.childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    framing(ch);
                    ch.pipeline().addLast(new Backend());
                }
            });
        } else {
            int backend = Integer.parseInt(args[2]);
            Bootstrap b = new Bootstrap().group(workers).channel(NioSocketChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) CALL_MS)
                    .option(ChannelOption.TCP_NODELAY, true)
                    .remoteAddress(new InetSocketAddress("127.0.0.1", backend));
            pool = new FixedChannelPool(b, new AbstractChannelPoolHandler() {
                @Override
                public void channelCreated(Channel ch) {
                    framing(ch);
                    ch.pipeline().addLast(new BackendLink());
                }
            }, ChannelHealthChecker.ACTIVE, FixedChannelPool.AcquireTimeoutAction.FAIL, CALL_MS, 3, 64);
            sb.childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new HttpServerCodec());
                    ch.pipeline().addLast(new HttpObjectAggregator(MAX_FRAME));
                    ch.pipeline().addLast(new Front());
                }
            });
        }
        sb.bind("127.0.0.1", port).sync();
        System.err.println("netty " + role + ": listening on 127.0.0.1:" + port);
    }
}
