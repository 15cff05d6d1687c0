// The customer-service platform: one bot per user.
//
// Five bots are registered as instances of the pool "support", four seats
// each (poolagent dev --pool support --capacity 20 --instances 5 --seats 4).
// Twenty users arrive at once; each is assigned a bot by claiming a seat
// charged to the user as tenant, with a tenant limit of 1, so that no user
// ever holds two bots. The client keeps its session alive from a
// background thread, checks that every user got a bot, that no bot serves
// more than four users, that a 21st user is refused with the reason, that
// a seat outlives the session TTL while the keepalives run, that the loss
// stream reports a release, and that the
// freed bot goes to the user who left, not to one who has a bot. On exit it
// releases every seat and deletes the session.
//
// A single file, JDK 17, java.net.http only:
//
//     java SupportBots.java [API_URL]     # default http://127.0.0.1:8480
//
// API_URL may also come from $ETCDPOOL_API; $ETCDPOOL_TOKEN, if set, is
// sent as a bearer token (its principal needs admin and claim on
// "support"). Exits 0 when every answer was right, 1 otherwise.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

public class SupportBots {
    static final String POOL = "support";
    static final int USERS = 20, BOTS = 5, SEATS_PER_BOT = 4, TTL = 2;

    public static void main(String[] args) {
        String base = args.length > 0 ? args[0] : Objects.requireNonNullElse(System.getenv("ETCDPOOL_API"), "http://127.0.0.1:8480");
        Api api = new Api(base, System.getenv("ETCDPOOL_TOKEN"));
        try {
            new SupportBots(api).run();
            System.out.println("OK");
        } catch (Exception e) {
            System.err.println("FAIL: " + e.getMessage());
            System.exit(1);
        }
    }

    final Api api;
    final Map<String, Map<String, Object>> assigned = new ConcurrentHashMap<>();
    String session;

    SupportBots(Api api) { this.api = api; }

    void run() throws Exception {
        Reply r = api.call("PUT", "/v1/pools/" + POOL, Map.of("capacity", USERS, "tenantLimit", 1));
        r.expect("set one bot per user on " + POOL, 200, 201);
        r = api.call("POST", "/v1/sessions", Map.of("ttl", TTL)).expect("open session", 201);
        session = r.str("id");
        ScheduledExecutorService keepalive = Executors.newSingleThreadScheduledExecutor();
        keepalive.scheduleAtFixedRate(this::keepAlive, 0, TTL * 1000 / 3, TimeUnit.MILLISECONDS);
        try {
            play();
        } finally {
            keepalive.shutdownNow();
            releaseAll();
        }
    }

    void keepAlive() {
        try {
            api.call("POST", "/v1/sessions/" + session + "/keepalive", null).expect("keepalive", 200);
        } catch (Exception e) {
            System.err.println("keepalive: " + e.getMessage());
        }
    }

    void play() throws Exception {
        ExecutorService users = Executors.newFixedThreadPool(USERS);
        List<Future<Reply>> answers = new ArrayList<>();
        for (int i = 0; i < USERS; i++) {
            String user = "user-" + i;
            answers.add(users.submit(() -> api.call("POST", "/v1/pools/" + POOL + "/claims",
                    Map.of("session", session, "tenant", user, "holder", user))));
        }
        Map<String, Integer> perBot = new TreeMap<>();
        for (int i = 0; i < USERS; i++) {
            Reply r = answers.get(i).get().expect("assign a bot to user-" + i, 201);
            assigned.put("user-" + i, r.body);
            perBot.merge(r.str("instance"), 1, Integer::sum);
            if (r.str("address").isEmpty()) throw new Exception("user-" + i + " got no bot address: " + r.raw);
        }
        users.shutdown();
        if (perBot.size() != BOTS || perBot.values().stream().anyMatch(n -> n > SEATS_PER_BOT))
            throw new Exception("users per bot " + perBot + ", want " + BOTS + " bots with at most " + SEATS_PER_BOT + " each");
        System.out.println(USERS + " users assigned, users per bot: " + perBot);

        Reply extra = api.call("POST", "/v1/pools/" + POOL + "/claims", Map.of("session", session, "tenant", "user-20"));
        extra.expectError("a 21st user", 409, "no_seat", null);
        if (!List.of("pool_full", "instances_full").contains(extra.str("reason")))
            throw new Exception("21st user refused for " + extra.str("reason") + ", want pool_full or instances_full");

        Thread.sleep(TTL * 1000L + 500); // past the TTL: only the keepalives hold the seats
        Reply seats = api.call("GET", "/v1/pools/" + POOL + "/seats", null).expect("list seats", 200);
        if (seats.list.size() != USERS) throw new Exception(seats.list.size() + " seats held after the TTL, want " + USERS);
        System.out.println("seats held past the TTL while the session is kept alive");

        watchRelease("user-7");
        // A bot is free now, but not for a user who has one.
        Reply twice = api.call("POST", "/v1/pools/" + POOL + "/claims", Map.of("session", session, "tenant", "user-0"));
        twice.expectError("user-0 asks for a second bot", 409, "no_seat", "tenant_limit");
        Reply back = api.call("POST", "/v1/pools/" + POOL + "/claims", Map.of("session", session, "tenant", "user-7", "holder", "user-7"));
        assigned.put("user-7", back.expect("user-7 comes back", 201).body);
        System.out.println("user-7 came back and was assigned " + back.str("instance"));
    }

    // watchRelease opens user's loss stream, releases the seat, and expects
    // the stream to say "lost" with reason "released".
    void watchRelease(String user) throws Exception {
        Map<String, Object> c = assigned.get(user);
        String q = "?token=" + num(c.get("token")) + "&session=" + session;
        String seatPath = "/v1/pools/" + POOL + "/seats/" + num(c.get("seat"));
        HttpResponse<java.io.InputStream> stream = api.stream(seatPath + "/events" + q);
        BufferedReader rd = new BufferedReader(new InputStreamReader(stream.body()));
        if (!nextEvent(rd)[0].equals("held")) throw new Exception("loss stream did not start with held");
        api.call("DELETE", seatPath + q, null).expect(user + " releases", 204);
        assigned.remove(user);
        String[] ev = nextEvent(rd);
        if (!ev[0].equals("lost") || !ev[1].contains("\"reason\":\"released\""))
            throw new Exception("loss stream said " + ev[0] + " " + ev[1] + ", want lost/released");
        rd.close();
        System.out.println(user + " released; the loss stream said: " + ev[1]);
    }

    static String[] nextEvent(BufferedReader rd) throws Exception {
        String event = null, data = null, line;
        while ((line = rd.readLine()) != null) {
            if (line.startsWith("event: ")) event = line.substring(7);
            else if (line.startsWith("data: ")) data = line.substring(6);
            else if (line.isEmpty() && event != null) return new String[]{event, data};
        }
        throw new Exception("event stream ended");
    }

    void releaseAll() {
        int failed = 0;
        for (Map.Entry<String, Map<String, Object>> e : assigned.entrySet()) {
            Map<String, Object> c = e.getValue();
            String path = "/v1/pools/" + POOL + "/seats/" + num(c.get("seat")) + "?token=" + num(c.get("token")) + "&session=" + session;
            try {
                api.call("DELETE", path, null).expect(e.getKey() + " releases", 204);
            } catch (Exception ex) {
                System.err.println(ex.getMessage());
                failed++;
            }
        }
        try {
            api.call("DELETE", "/v1/sessions/" + session, null).expect("delete session", 204);
            Reply st = api.call("GET", "/v1/pools/" + POOL, null).expect("pool status", 200);
            if (num(st.body.get("held")) != 0) throw new Exception("seats still held on exit: " + st.raw);
        } catch (Exception ex) {
            System.err.println("FAIL: " + ex.getMessage());
            System.exit(1);
        }
        if (failed > 0) {
            System.err.println("FAIL: " + failed + " releases failed");
            System.exit(1);
        }
        System.out.println("every seat released, session deleted");
    }

    static long num(Object o) { return ((Number) o).longValue(); }

    // Api is a JSON-over-HTTP client on java.net.http.
    static final class Api {
        final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        final String base, token;

        Api(String base, String token) { this.base = base.replaceAll("/+$", ""); this.token = token; }

        HttpRequest.Builder request(String path) {
            HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).header("Content-Type", "application/json");
            if (token != null && !token.isEmpty()) b.header("Authorization", "Bearer " + token);
            return b;
        }

        Reply call(String method, String path, Map<String, Object> body) throws Exception {
            HttpRequest.BodyPublisher pub = body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(Json.write(body));
            HttpResponse<String> resp = http.send(request(path).timeout(Duration.ofSeconds(30)).method(method, pub).build(), HttpResponse.BodyHandlers.ofString());
            return new Reply(method + " " + path, resp.statusCode(), resp.body());
        }

        HttpResponse<java.io.InputStream> stream(String path) throws Exception {
            HttpResponse<java.io.InputStream> resp = http.send(request(path).GET().build(), HttpResponse.BodyHandlers.ofInputStream());
            if (resp.statusCode() != 200) throw new Exception("stream " + path + ": " + resp.statusCode());
            return resp;
        }
    }

    // Reply is a status and its decoded JSON body (an object or a list).
    static final class Reply {
        final String what, raw;
        final int status;
        final Map<String, Object> body;
        final List<Object> list;

        @SuppressWarnings("unchecked")
        Reply(String what, int status, String raw) {
            this.what = what; this.status = status; this.raw = raw;
            Object v = raw.isEmpty() ? null : Json.parse(raw);
            this.body = v instanceof Map ? (Map<String, Object>) v : Map.of();
            this.list = v instanceof List ? (List<Object>) v : List.of();
        }

        String str(String k) { Object v = body.get(k); return v == null ? "" : v.toString(); }

        Reply expect(String doing, int... want) throws Exception {
            for (int w : want) if (status == w) return this;
            throw new Exception(doing + " (" + what + "): got " + status + " " + raw + ", want " + Arrays.toString(want));
        }

        void expectError(String doing, int want, String code, String reason) throws Exception {
            if (status != want || !str("code").equals(code) || (reason != null && !str("reason").equals(reason)))
                throw new Exception(doing + ": got " + status + " " + raw + ", want " + want + " " + code + (reason == null ? "" : " " + reason));
            System.out.println(doing + ": refused, " + str("code") + " (" + str("reason") + ")");
        }
    }

    // Json is just enough JSON for this client.
    static final class Json {
        final String s;
        int i;

        Json(String s) { this.s = s; }

        static Object parse(String s) { Json j = new Json(s); Object v = j.value(); j.ws(); if (j.i != s.length()) throw new IllegalArgumentException("trailing JSON"); return v; }

        static String write(Object o) {
            if (o instanceof Map<?, ?> m) {
                StringJoiner sj = new StringJoiner(",", "{", "}");
                m.forEach((k, v) -> sj.add(write(k) + ":" + write(v)));
                return sj.toString();
            }
            if (o instanceof String str) return "\"" + str.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
            return String.valueOf(o);
        }

        void ws() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

        Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++; ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws(); String k = (String) value(); ws(); i++; // ':'
                    m.put(k, value()); ws();
                    if (s.charAt(i++) == '}') return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++; ws();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value()); ws();
                    if (s.charAt(i++) == ']') return l;
                }
            }
            if (c == '"') {
                StringBuilder b = new StringBuilder();
                for (i++; s.charAt(i) != '"'; i++) {
                    char ch = s.charAt(i);
                    if (ch == '\\') {
                        char e = s.charAt(++i);
                        switch (e) {
                            case 'n' -> b.append('\n');
                            case 't' -> b.append('\t');
                            case 'u' -> { b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16)); i += 4; }
                            default -> b.append(e);
                        }
                    } else b.append(ch);
                }
                i++;
                return b.toString();
            }
            int start = i;
            while (i < s.length() && "{}[],: \n\t\r".indexOf(s.charAt(i)) < 0) i++;
            String tok = s.substring(start, i);
            switch (tok) {
                case "true": return true;
                case "false": return false;
                case "null": return null;
            }
            return tok.contains(".") || tok.contains("e") || tok.contains("E") ? (Object) Double.parseDouble(tok) : (Object) Long.parseLong(tok);
        }
    }
}
