// gradnet's ns-3 model: hosts' agents and the INA switch, per-packet work in C++.
// Loaded by sim/ns3env.py through cppyy.cppdef; semantics documented in docs/simulation.md
// beside p4src/include/ina_aggregator.p4 (bytes and packets only, no per-value arithmetic).
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>
#include <algorithm>
#include <deque>
#include <unordered_map>

namespace gradsim {
using namespace ns3;

enum : uint8_t { GRAD = 1, PARTIAL = 2, RESULT = 3, CLEAR = 4 };
enum : uint8_t { F_RETX = 1, F_VIA_SD = 2 };
static const uint16_t PORT = 40000;
static const uint32_t HDR = 20;  // the INA header fields the model reads; packets are
                                 // the wire's size (Python passes wire.ina.INA_HEADER_LEN)

// The first 20 payload bytes: the INA header's fields the model needs (widened where the
// model goes past the wire's limits: 16-bit fan-in and count for >255 contributors);
// contributors are a set id (bitmaps beyond 32 workers).
#pragma pack(push, 1)
struct Hdr {
  uint8_t type, flags;
  uint16_t fanin, sd_fanin, count;
  uint32_t fragment;
  uint16_t tag, origin;
  uint32_t set;
};
#pragma pack(pop)
static_assert(sizeof(Hdr) == HDR, "header is 20 bytes");

// Contributor sets: id < N is the singleton {id}; larger ids index `sets`.
struct Sets {
  uint32_t n = 0;
  std::vector<std::vector<uint32_t>> sets;
  void Reset(uint32_t workers) { n = workers; sets.clear(); }
  uint32_t Make(std::vector<uint32_t> v) { sets.push_back(std::move(v)); return n + sets.size() - 1; }
  template <class F> void Each(uint32_t id, F f) const {
    if (id < n) f(id); else for (uint32_t r : sets[id - n]) f(r);
  }
  uint32_t Size(uint32_t id) const { return id < n ? 1 : (uint32_t)sets[id - n].size(); }
};
static Sets g_sets;

struct Stats {  // totals the Python side reads after the run
  uint64_t retx = 0, ps_dups = 0, ps_accepted = 0, sw_aggregated = 0, sw_partials = 0,
           sw_passed_sd = 0, sw_passed_ps = 0, sw_dups = 0, sw_taken_over = 0, results_mc = 0,
           clears = 0;
};
static Stats g_stats;

static uint32_t crc32_bytes(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}
// ina_aggregator.p4 hash_fragment() (the default index): crc32 over {job_id (8), fragment (32), origin (16)}, mod slots.
uint32_t AggIndex(uint8_t job, uint32_t frag, uint16_t origin, uint32_t slots) {
  uint8_t b[7] = {job, (uint8_t)(frag >> 24), (uint8_t)(frag >> 16), (uint8_t)(frag >> 8),
                  (uint8_t)frag, (uint8_t)(origin >> 8), (uint8_t)origin};
  return crc32_bytes(b, 7) % slots;
}

static Ptr<Packet> Make(const Hdr& h, uint32_t payload) {
  std::vector<uint8_t> buf(std::max(payload, HDR), 0);
  std::memcpy(buf.data(), &h, HDR);
  return Create<Packet>(buf.data(), (uint32_t)buf.size());
}
static bool Read(Ptr<Packet> p, Hdr& h) {
  if (p->GetSize() < HDR) return false;
  p->CopyData((uint8_t*)&h, HDR);
  return true;
}
static Ptr<Socket> UdpSock(Ptr<Node> n) {
  Ptr<Socket> s = Socket::CreateSocket(n, UdpSocketFactory::GetTypeId());
  s->Bind(InetSocketAddress(Ipv4Address::GetAny(), PORT));
  return s;
}

// ------------------------------------------------------------------ worker (hosts/ina/worker.py)
class Worker : public Application {
 public:
  uint32_t rank = 0, frags = 0, window = 64, payload = 276;
  double timeout = 0.2, max_backoff = 1.0;
  Ipv4Address ps;
  std::vector<uint16_t> tag, fanin, sd_fanin;
  std::vector<uint8_t> via_sd;
  std::map<uint16_t, Ipv4Address> sw_ip;
  double start_s = -1, done_s = -1;
  uint32_t retx = 0;

  void StartApplication() override {
    sock = UdpSock(GetNode());
    sock->SetRecvCallback(MakeCallback(&Worker::Recv, this));
    done.assign(frags, 0); tries.assign(frags, 0); sent.assign(frags, 0);
    start_s = Simulator::Now().GetSeconds();
    Fill();
  }
  void StopApplication() override {}

 private:
  Ptr<Socket> sock;
  std::vector<uint8_t> done, sent;
  std::vector<uint32_t> tries;
  uint32_t next = 0, outstanding = 0, finished = 0;

  void Fill() {
    while (outstanding < window && next < frags) {
      uint32_t f = next++;
      Hdr h{GRAD, 0, fanin[f], 0, 1, f, tag[f], 0, rank};
      if (via_sd[f]) { h.flags = F_VIA_SD; h.sd_fanin = sd_fanin[f]; }
      Ipv4Address dst = tag[f] ? sw_ip[tag[f]] : ps;
      if (!tag[f]) h.fanin = 0;
      sock->SendTo(Make(h, payload), 0, InetSocketAddress(dst, PORT));
      sent[f] = 1; outstanding++;
      Simulator::Schedule(Seconds(timeout), &Worker::Timer, this, f, 0u);
    }
  }
  void Timer(uint32_t f, uint32_t k) {
    if (done[f]) return;
    Hdr h{GRAD, F_RETX, 0, 0, 1, f, 0, 0, rank};  // retransmissions: straight to the PS
    sock->SendTo(Make(h, payload), 0, InetSocketAddress(ps, PORT));
    retx++; g_stats.retx++;
    double next_to = std::min(timeout * double(1u << std::min(k + 1, 20u)), max_backoff);
    Simulator::Schedule(Seconds(next_to), &Worker::Timer, this, f, k + 1);
  }
  void Recv(Ptr<Socket> s) {
    Ptr<Packet> p; Address from;
    while ((p = s->RecvFrom(from))) {
      Hdr h;
      if (!Read(p, h) || h.type != RESULT || h.fragment >= frags || !sent[h.fragment]
          || done[h.fragment]) continue;
      done[h.fragment] = 1; outstanding--; finished++;
      if (finished == frags) done_s = Simulator::Now().GetSeconds();
      Fill();
    }
  }
};

// ------------------------------------------------------------------ parameter server (hosts/ina/ps.py)
class Switch;
class Ps : public Application {
 public:
  uint32_t workers = 0, frags = 0, payload = 276, clear_size = HDR;
  bool has_sd = false;
  uint16_t sd_id = 0;
  Ipv4Address sd_ip;
  std::vector<Ipv4Address> worker_ip;
  std::map<uint16_t, Ipv4Address> sw_ip;
  std::vector<std::vector<uint16_t>> clear_to;  // per fragment: switches != s_d to CLEAR
  Switch* sd_model = nullptr;                    // s_d's model, for CLEARs passing it
  double last_s = -1;
  uint64_t dups = 0;

  void StartApplication() override {
    sock = UdpSock(GetNode());
    sock->SetRecvCallback(MakeCallback(&Ps::Recv, this));
    have.assign(frags, std::vector<uint8_t>(workers, 0));
    cnt.assign(frags, 0);
  }
  void StopApplication() override {}
  void Recv(Ptr<Socket> s);

 private:
  Ptr<Socket> sock;
  std::vector<std::vector<uint8_t>> have;
  std::vector<uint32_t> cnt;
  void Send(const Hdr& h, uint32_t size, Ipv4Address dst) {
    sock->SendTo(Make(h, size), 0, InetSocketAddress(dst, PORT));
  }
};

// ------------------------------------------------------------------ switch (p4src/include/ina_aggregator.p4)
struct Slot { bool used = false; uint32_t frag = 0; uint16_t origin = 0; uint32_t count = 0;
              std::vector<uint32_t> members; double t = 0; };

class Switch : public Application {
 public:
  uint16_t id = 0, sd_id = 0;
  bool aggregating = false;
  uint32_t slots = 1024, payload = 276;
  double aging_s = 1.0;  // 0: no aging
  Ipv4Address ps_ip, sd_ip;
  std::vector<Ipv4Address> tree_children;  // RESULT fan-out: child switches, then workers
  std::vector<uint8_t> child_is_switch;
  uint8_t job = 1;

  void StartApplication() override {
    sock = UdpSock(GetNode());
    sock->SetRecvCallback(MakeCallback(&Switch::Recv, this));
    agg.assign(slots, Slot());
  }
  void StopApplication() override {}
  void Free(uint32_t frag, uint16_t origin) {
    Slot& s = agg[AggIndex(job, frag, origin, slots)];
    if (s.used && s.frag == frag && s.origin == origin) { s = Slot(); }
  }
  void Fanout(const Hdr& h) {
    for (size_t i = 0; i < tree_children.size(); i++)
      sock->SendTo(Make(h, payload), 0, InetSocketAddress(tree_children[i], PORT));
  }

 private:
  Ptr<Socket> sock;
  std::vector<Slot> agg;
  void Out(const Hdr& h, Ipv4Address dst) {
    sock->SendTo(Make(h, payload), 0, InetSocketAddress(dst, PORT));
  }
  void Recv(Ptr<Socket> so) {
    Ptr<Packet> p; Address from;
    while ((p = so->RecvFrom(from))) {
      Hdr h;
      if (!Read(p, h)) continue;
      if (h.type == RESULT) {
        if (h.tag == id && h.tag == sd_id) { Free(h.fragment, 0); g_stats.results_mc++; }
        h.tag = 0;  // a replica going down the tree
        Fanout(h);
        continue;
      }
      if (!aggregating || h.tag != id) continue;
      if (h.type == CLEAR) { Free(h.fragment, 0); continue; }
      if (h.type != GRAD) continue;
      Slot& s = agg[AggIndex(job, h.fragment, h.origin, slots)];
      double now = Simulator::Now().GetSeconds();
      // ina.p4's aging: another fragment's slot past the timeout, its own past 4x it
      bool own = s.used && s.frag == h.fragment && s.origin == h.origin;
      if (s.used && aging_s > 0 && now - s.t > (own ? 4 : 1) * aging_s) {
        s = Slot(); g_stats.sw_taken_over++;
      }
      if (!s.used || (s.frag == h.fragment && s.origin == h.origin)) {
        bool overlap = false;
        if (s.used) g_sets.Each(h.set, [&](uint32_t r) {
          if (std::find(s.members.begin(), s.members.end(), r) != s.members.end()) overlap = true; });
        if (!overlap) {
          if (!s.used) { s.used = true; s.frag = h.fragment; s.origin = h.origin; }
          g_sets.Each(h.set, [&](uint32_t r) { s.members.push_back(r); });
          s.count += g_sets.Size(h.set); s.t = now; g_stats.sw_aggregated++;
          if (s.count >= h.fanin) Emit(h, s);
        } else if (s.count >= h.fanin) {
          Emit(h, s);  // a resend to a complete aggregate: the PARTIAL may have been lost
        } else {
          g_stats.sw_dups++;
        }
      } else if (id == sd_id || h.origin != 0) {
        h.tag = 0; g_stats.sw_passed_ps++; Out(h, ps_ip);
      } else {
        h.origin = id; h.tag = sd_id; g_stats.sw_passed_sd++; Out(h, sd_ip);
      }
    }
  }
  void Emit(Hdr h, Slot& s) {
    h.set = g_sets.Make(s.members);
    h.count = (uint16_t)std::min<uint32_t>(s.count, 65535);
    g_stats.sw_partials++;
    if ((h.flags & F_VIA_SD) && id != sd_id) {
      h.tag = sd_id; h.fanin = h.sd_fanin; h.flags &= ~F_VIA_SD; h.type = GRAD;
      h.origin = 0;
      Out(h, sd_ip);
    } else {
      h.type = PARTIAL; h.tag = id;
      Out(h, ps_ip);
    }
  }
};

void Ps::Recv(Ptr<Socket> s) {
  Ptr<Packet> p; Address from;
  while ((p = s->RecvFrom(from))) {
    Hdr h;
    if (!Read(p, h) || (h.type != GRAD && h.type != PARTIAL) || h.fragment >= frags) continue;
    uint32_t f = h.fragment;
    if (cnt[f] == workers) {  // finished: a retransmission gets its RESULT again by unicast
      if (h.flags & F_RETX) {
        Hdr r{RESULT, F_RETX, 0, 0, (uint16_t)std::min<uint32_t>(workers, 65535), f, 0, 0, 0};
        Send(r, payload, InetSocketAddress::ConvertFrom(from).GetIpv4());
      }
      dups++; g_stats.ps_dups++;
      continue;
    }
    bool overlap = false;
    g_sets.Each(h.set, [&](uint32_t r) { if (r >= workers || have[f][r]) overlap = true; });
    if (overlap) { dups++; g_stats.ps_dups++; continue; }
    g_sets.Each(h.set, [&](uint32_t r) { have[f][r] = 1; cnt[f]++; });
    g_stats.ps_accepted++;
    if (cnt[f] < workers) continue;
    Hdr r{RESULT, 0, 0, 0, (uint16_t)std::min<uint32_t>(workers, 65535), f, 0, 0, 0};
    if (has_sd) {
      r.tag = sd_id;
      Send(r, payload, sd_ip);
    } else {
      for (auto& w : worker_ip) Send(r, payload, w);
    }
    for (uint16_t sw : clear_to[f]) {
      Hdr c{CLEAR, 0, 0, 0, 0, f, sw, 0, 0};
      Send(c, clear_size, sw_ip[sw]);
      g_stats.clears++;
      if (sd_model) sd_model->Free(f, sw);  // the CLEAR passes s_d (ina_aggregator.p4, last branch)
    }
    last_s = Simulator::Now().GetSeconds();
  }
}

// ------------------------------------------------------------------ ring all-reduce over TCP
// hosts/bml/baselines.py:ring: 2(N-1) steps of one chunk to the right neighbour, each chunk in
// `pieces` pieces; a piece received at step u is sent on at step u+1 at once. Python gives
// the byte sizes of the units this peer sends (sent[u*P+c]) and receives (got[u*P+c]).
class RingPeer : public Application {
 public:
  uint32_t pieces = 4, steps = 2;
  std::vector<uint32_t> sent, got;
  Ipv4Address right;
  uint16_t port = 41000;
  double start_s = -1, done_s = -1;

  void StartApplication() override {
    lsock = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
    lsock->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
    lsock->Listen();
    lsock->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                             MakeCallback(&RingPeer::Accept, this));
    Simulator::Schedule(MilliSeconds(1), &RingPeer::Connect, this);
  }
  void StopApplication() override {}

 private:
  Ptr<Socket> lsock, out, in;
  uint64_t rx = 0, want = 0, queued = 0;
  uint32_t k = 0;

  void Connect() {
    out = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
    out->Bind();
    out->SetConnectCallback(MakeCallback(&RingPeer::Connected, this),
                            MakeNullCallback<void, Ptr<Socket>>());
    out->SetSendCallback(MakeCallback(&RingPeer::Pump, this));
    out->Connect(InetSocketAddress(right, port));
  }
  void Connected(Ptr<Socket>) {
    start_s = Simulator::Now().GetSeconds();
    for (uint32_t c = 0; c < pieces; c++) queued += sent[c];
    Pump(out, 0);
  }
  void Pump(Ptr<Socket>, uint32_t) {
    while (queued > 0 && out->GetTxAvailable() > 0) {
      uint32_t n = (uint32_t)std::min<uint64_t>(queued, std::min<uint32_t>(out->GetTxAvailable(), 65536));
      int r = out->Send(Create<Packet>(n));
      if (r <= 0) break;
      queued -= (uint32_t)r;
    }
  }
  void Accept(Ptr<Socket> s, const Address&) {
    in = s;
    in->SetRecvCallback(MakeCallback(&RingPeer::Recv, this));
    want = got.empty() ? 0 : got[0];
  }
  void Recv(Ptr<Socket> s) {
    Ptr<Packet> p;
    uint32_t total = (uint32_t)got.size();
    while ((p = s->Recv())) {
      rx += p->GetSize();
      while (k < total && rx >= want) {
        uint32_t u = k / pieces, c = k % pieces;
        if (u + 1 < steps) { queued += sent[(u + 1) * pieces + c]; }
        k++;
        if (k < total) want += got[k];
      }
      if (out) Pump(out, 0);
      if (k == total && done_s < 0) done_s = Simulator::Now().GetSeconds();
    }
  }
};

// ------------------------------------------------------------------ framed messages over TCP
// hosts/bml/transport.py: one TCP connection per (NIC, peer), messages framed by a 16-byte
// header (wire/bcube.py:BCUBE_HEADER; here: message id and body length). A host runs
// threads of steps (hosts/bml/agent.py:run_bml's threads, the sharded PS's loop); a step
// waits until `count` messages of each id it names are in, then queues its sends, each on
// its connection in order. Python turns the schedule into the flat arrays below.
static const uint32_t MSG_HDR = 16;
class MsgHost : public Application {
 public:
  uint16_t port = 42000;
  double go_s = 0.01;  // every host starts its threads here, after the connections are up
  std::vector<Ipv4Address> conn_local, conn_remote;  // connection c: bind, connect to
  // steps, in thread order: step i belongs to thread step_thread[i]; its waits are
  // wait_id/wait_count[wait_off[i] .. wait_off[i+1]), its sends send_conn/bytes/id
  // [send_off[i] .. send_off[i+1])
  std::vector<uint32_t> step_thread, wait_off, wait_id, wait_count, send_off, send_conn,
      send_bytes, send_id;
  double start_s = -1, done_s = -1;
  uint32_t connected = 0;

  void StartApplication() override {
    lsock = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
    lsock->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
    lsock->Listen();
    lsock->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                             MakeCallback(&MsgHost::Accept, this));
    out.resize(conn_remote.size());
    for (size_t c = 0; c < conn_remote.size(); c++) {
      Ptr<Socket> s = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
      s->Bind(InetSocketAddress(conn_local[c], 0));
      s->SetConnectCallback(MakeCallback(&MsgHost::Connected, this),
                            MakeNullCallback<void, Ptr<Socket>>());
      s->SetSendCallback(MakeCallback(&MsgHost::Pump, this));
      s->Connect(InetSocketAddress(conn_remote[c], port));
      out[c].sock = s;
      by_sock[PeekPointer(s)] = (uint32_t)c;
    }
    // threads: the first step of each
    uint32_t nthreads = 0;
    for (uint32_t t : step_thread) nthreads = std::max(nthreads, t + 1);
    cur.assign(nthreads, UINT32_MAX);
    last.assign(nthreads, 0);
    for (uint32_t i = 0; i < step_thread.size(); i++) {
      uint32_t t = step_thread[i];
      if (cur[t] == UINT32_MAX) cur[t] = i;
      last[t] = i + 1;
    }
    Simulator::Schedule(Seconds(go_s) - Simulator::Now(), &MsgHost::Go, this);
  }
  void StopApplication() override {}

 private:
  struct Out { Ptr<Socket> sock; std::deque<std::pair<uint32_t, uint32_t>> q;  // (id, bytes)
               uint32_t hdr_left = 0, body_left = 0; };
  struct In { uint32_t have = 0; uint8_t hdr[MSG_HDR]; uint64_t body_left = 0; uint32_t id = 0; };
  Ptr<Socket> lsock;
  std::vector<Out> out;
  std::map<Socket*, uint32_t> by_sock;
  std::map<Socket*, In> ins;
  std::unordered_map<uint32_t, uint32_t> got;  // message id -> messages fully in
  std::vector<uint32_t> cur, last;              // per thread: next step, end
  bool started = false;
  std::vector<uint8_t> buf;

  void Connected(Ptr<Socket>) { connected++; }
  void Go() {
    started = true;
    start_s = Simulator::Now().GetSeconds();
    Advance();
  }
  void Advance() {
    bool all = true;
    for (size_t t = 0; t < cur.size(); t++) {
      while (cur[t] < last[t] && step_thread[cur[t]] == t) {
        uint32_t i = cur[t];
        bool ok = true;
        for (uint32_t w = wait_off[i]; w < wait_off[i + 1]; w++) {
          auto it = got.find(wait_id[w]);
          if (it == got.end() || it->second < wait_count[w]) { ok = false; break; }
        }
        if (!ok) break;
        for (uint32_t x = send_off[i]; x < send_off[i + 1]; x++) {
          Out& o = out[send_conn[x]];
          o.q.push_back({send_id[x], send_bytes[x]});
          if (o.q.size() == 1) Pump(o.sock, 0);
        }
        // the next step of this thread: the next index with the same thread
        uint32_t j = i + 1;
        while (j < last[t] && step_thread[j] != t) j++;
        cur[t] = j;
      }
      if (cur[t] < last[t]) all = false;
    }
    if (all && done_s < 0) done_s = Simulator::Now().GetSeconds();
  }
  void Pump(Ptr<Socket> s, uint32_t) {
    Out& o = out[by_sock[PeekPointer(s)]];
    while (!o.q.empty()) {
      if (o.hdr_left == 0 && o.body_left == 0) { o.hdr_left = MSG_HDR; o.body_left = o.q.front().second; }
      if (o.hdr_left) {
        if (s->GetTxAvailable() < MSG_HDR) return;
        uint8_t h[MSG_HDR] = {0};
        std::memcpy(h, &o.q.front().first, 4);
        std::memcpy(h + 4, &o.q.front().second, 4);
        if (s->Send(Create<Packet>(h, MSG_HDR)) < 0) return;
        o.hdr_left = 0;
      }
      while (o.body_left > 0) {
        uint32_t n = std::min<uint32_t>(o.body_left, std::min<uint32_t>(s->GetTxAvailable(), 65536));
        if (n == 0) return;
        int r = s->Send(Create<Packet>(n));
        if (r <= 0) return;
        o.body_left -= (uint32_t)r;
      }
      o.q.pop_front();
    }
  }
  void Accept(Ptr<Socket> s, const Address&) {
    ins[PeekPointer(s)] = In();
    s->SetRecvCallback(MakeCallback(&MsgHost::Recv, this));
  }
  void Recv(Ptr<Socket> s) {
    In& st = ins[PeekPointer(s)];
    Ptr<Packet> p;
    bool any = false;
    while ((p = s->Recv())) {
      uint32_t n = p->GetSize();
      buf.resize(n);
      p->CopyData(buf.data(), n);
      uint32_t at = 0;
      while (at < n) {
        if (st.have < MSG_HDR) {
          uint32_t take = std::min(MSG_HDR - st.have, n - at);
          std::memcpy(st.hdr + st.have, buf.data() + at, take);
          st.have += take; at += take;
          if (st.have < MSG_HDR) break;
          uint32_t len;
          std::memcpy(&st.id, st.hdr, 4);
          std::memcpy(&len, st.hdr + 4, 4);
          st.body_left = len;
        }
        uint64_t take = std::min<uint64_t>(st.body_left, n - at);
        st.body_left -= take; at += (uint32_t)take;
        if (st.body_left == 0) { got[st.id]++; st.have = 0; any = true; }
      }
    }
    if (any && started) Advance();
  }
};

// ------------------------------------------------------------------ routing
// Static host routes in a hash table: ns-3's Ipv4StaticRouting scans its route list per
// packet, which at k=16 (1,344 destinations a switch) costs more than everything else.
// Consulted before the static and global routing of the node's list routing; local
// delivery stays with Ipv4ListRouting.
class HashRouting : public Ipv4RoutingProtocol {
 public:
  std::unordered_map<uint32_t, uint32_t> table;  // destination address -> interface
  int32_t default_if = -1;

  Ptr<Ipv4Route> Lookup(Ipv4Address dst) {
    auto it = table.find(dst.Get());
    int32_t itf = it != table.end() ? (int32_t)it->second : default_if;
    if (itf < 0) return nullptr;
    Ptr<Ipv4Route> r = Create<Ipv4Route>();
    r->SetDestination(dst);
    r->SetGateway(Ipv4Address::GetZero());
    r->SetSource(ipv4->GetAddress(itf, 0).GetLocal());
    r->SetOutputDevice(ipv4->GetNetDevice(itf));
    return r;
  }
  Ptr<Ipv4Route> RouteOutput(Ptr<Packet>, const Ipv4Header& h, Ptr<NetDevice>,
                             Socket::SocketErrno& err) override {
    Ptr<Ipv4Route> r = Lookup(h.GetDestination());
    err = r ? Socket::ERROR_NOTERROR : Socket::ERROR_NOROUTETOHOST;
    return r;
  }
  bool RouteInput(Ptr<const Packet> p, const Ipv4Header& h, Ptr<const NetDevice>,
                  const UnicastForwardCallback& ucb, const MulticastForwardCallback&,
                  const LocalDeliverCallback&, const ErrorCallback&) override {
    Ptr<Ipv4Route> r = Lookup(h.GetDestination());
    if (!r) return false;
    ucb(r, p, h);
    return true;
  }
  void NotifyInterfaceUp(uint32_t) override {}
  void NotifyInterfaceDown(uint32_t) override {}
  void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}
  void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}
  void SetIpv4(Ptr<Ipv4> i) override { ipv4 = i; }
  void PrintRoutingTable(Ptr<OutputStreamWrapper>, Time::Unit) const override {}

 private:
  Ptr<Ipv4> ipv4;
};

// Shortest-path host routes for every node toward every destination address; ties between
// equal-cost next hops broken by a hash of (node, owner), a fixed ECMP-like spread.
// adj[u]: neighbours; ifc[u][i]: u's interface index toward adj[u][i]. Destination i is
// address dst_addr[i] of node dst_owner[i]; dst_attach[i] is the switch that address's NIC
// hangs off (host NICs: one per link, so a BCube server's level-l address is reached
// through its level-l switch only) or -1 (a switch's own address). Paths run through
// switches only (hosts never forward, as in controller/routing.py); a host sends to an
// address through its NIC nearest to it (a BCube server: the NIC on the peer's switch),
// else through its first NIC.
static std::vector<Ptr<HashRouting>> g_rt;
void InstallRoutes(NodeContainer& nodes, const std::vector<std::vector<int>>& adj,
                   const std::vector<std::vector<int>>& ifc,
                   const std::vector<uint32_t>& dst_addr, const std::vector<int>& dst_owner,
                   const std::vector<int>& dst_attach, const std::vector<int>& is_host) {
  size_t n = adj.size();
  g_rt.assign(n, nullptr);
  for (size_t u = 0; u < n; u++) {
    g_rt[u] = CreateObject<HashRouting>();
    Ptr<Ipv4> ip = nodes.Get(u)->GetObject<Ipv4>();
    Ptr<Ipv4ListRouting> list = DynamicCast<Ipv4ListRouting>(ip->GetRoutingProtocol());
    list->AddRoutingProtocol(g_rt[u], 100);
    if (is_host[u] && !ifc[u].empty()) g_rt[u]->default_if = ifc[u][0];
  }
  std::vector<int> dist(n);
  std::deque<int> q;
  for (size_t i = 0; i < dst_addr.size(); i++) {
    int d = dst_owner[i], at = dst_attach[i];
    uint32_t addr = dst_addr[i];
    std::fill(dist.begin(), dist.end(), -1);
    dist[d] = 0; q.clear(); q.push_back(d);
    while (!q.empty()) {
      int u = q.front(); q.pop_front();
      if (is_host[u] && u != d) continue;  // never route through a host
      for (int v : adj[u]) {
        if (u == d && at >= 0 && v != at) continue;  // a NIC is reached through its switch
        if (dist[v] < 0) { dist[v] = dist[u] + 1; q.push_back(v); }
      }
    }
    for (size_t u = 0; u < n; u++) {
      if ((int)u == d || dist[u] < 0) continue;
      if (is_host[u]) continue;
      std::vector<int> cand;
      for (size_t j = 0; j < adj[u].size(); j++) {
        int v = adj[u][j];
        if (dist[v] == dist[u] - 1 && (!is_host[v] || v == d)) cand.push_back((int)j);
      }
      if (cand.empty()) continue;
      uint32_t hsh = (uint32_t)(u * 2654435761u) ^ (uint32_t)(d * 40503u);
      hsh ^= hsh >> 13;
      g_rt[u]->table[addr] = (uint32_t)ifc[u][cand[hsh % cand.size()]];
    }
    for (size_t u = 0; u < n; u++) {  // hosts: the NIC on the switch nearest the address
      if (!is_host[u] || (int)u == d || adj[u].size() < 2) continue;
      int best = -1;
      for (size_t j = 0; j < adj[u].size(); j++) {
        int v = adj[u][j];
        if (!is_host[v] && dist[v] >= 0 && (best < 0 || dist[v] < dist[adj[u][best]])) best = (int)j;
      }
      if (best >= 0 && ifc[u][best] != g_rt[u]->default_if)
        g_rt[u]->table[addr] = (uint32_t)ifc[u][best];
    }
  }
}
// One route pinned: node u sends to address dst through interface itf (the LP's path to an
// aggregating switch, controller/routing.py's loopback_paths).
void PinRoute(uint32_t u, uint32_t dst, uint32_t itf) { g_rt[u]->table[dst] = itf; }
// The interface node u sends to dst through (-1: none; hosts: their first NIC).
int32_t RouteOf(uint32_t u, uint32_t dst) {
  auto it = g_rt[u]->table.find(dst);
  return it != g_rt[u]->table.end() ? (int32_t)it->second : g_rt[u]->default_if;
}

// Applications are made here and handed to Python as raw pointers (the node owns them):
// attributes set through cppyy on an ns3::Ptr proxy would land on the proxy, not the object.
template <class T> T* Add(Ptr<Node> node, double start_s) {
  Ptr<T> a = CreateObject<T>();
  node->AddApplication(a);
  a->SetStartTime(Seconds(start_s));
  return PeekPointer(a);
}
Worker* AddWorker(Ptr<Node> n, double at) { return Add<Worker>(n, at); }
Ps* AddPs(Ptr<Node> n, double at) { return Add<Ps>(n, at); }
Switch* AddSwitch(Ptr<Node> n, double at) { return Add<Switch>(n, at); }
RingPeer* AddRingPeer(Ptr<Node> n, double at) { return Add<RingPeer>(n, at); }
MsgHost* AddMsgHost(Ptr<Node> n, double at) { return Add<MsgHost>(n, at); }

// Bytes each device put on its link (frames, PPP header included), as the emulator's
// interface counters: the busiest link's bytes at its rate is the line-rate bound.
// Frames per device too: the packet-hops simulated (docs/simulation.md, where simulation stops).
static std::vector<uint64_t> g_tx, g_txp;
static void OnTx(uint32_t idx, Ptr<const Packet> p) { g_tx[idx] += p->GetSize(); ++g_txp[idx]; }
void CountTx(Ptr<NetDevice> dev, uint32_t idx) {
  if (g_tx.size() <= idx) { g_tx.resize(idx + 1, 0); g_txp.resize(idx + 1, 0); }
  g_tx[idx] = 0;
  g_txp[idx] = 0;
  dev->TraceConnectWithoutContext("PhyTxEnd", MakeBoundCallback(&OnTx, idx));
}
uint64_t TxBytes(uint32_t idx) { return idx < g_tx.size() ? g_tx[idx] : 0; }
uint64_t TxPackets(uint32_t n) {  // frames sent by devices 0..n-1
  uint64_t t = 0;
  for (uint32_t i = 0; i < n && i < g_txp.size(); ++i) t += g_txp[i];
  return t;
}

Stats GetStats() { return g_stats; }
void ResetStats(uint32_t workers) { g_stats = Stats(); g_sets.Reset(workers); }

}  // namespace gradsim
