package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// kafkaFloorSystem is the floor under offsetd-kafka's commits: a bare
// Kafka-protocol server, in a process of its own as offsetd-kafka's is,
// that reads each request frame, decodes it with kmsg, and answers
// OffsetCommit at once, storing nothing (and ApiVersions, Metadata and
// FindCoordinator, which a client needs to get there). It is driven exactly
// as offsetd-kafka is: one franz-go client and connection per committer,
// one OffsetCommit per commit on it. What offsetd-kafka costs above it is
// offsetd's: the handler, the coordinator and the fsync.
var kafkaFloorSystem = system{
	name:    "kafka-floor",
	network: true,
	open: func(dir string, callers int) (committer, error) {
		k, err := startKafkaClients(childKafkaFloor, dir, callers)
		return kafkaFloorStore{k}, err
	},
}

// kafkaFloorStore is the floor's clients: offsetd-kafka's, but for reads,
// since the floor keeps nothing to read.
type kafkaFloorStore struct{ k *kafkaStore }

func (f kafkaFloorStore) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	return f.k.Commit(ctx, group, offsets)
}

func (f kafkaFloorStore) serverCPU() (time.Duration, error) { return f.k.serverCPU() }

// journal is zero: the floor writes nothing.
func (f *kafkaFloor) journal() syncCounts { return syncCounts{} }

func (f kafkaFloorStore) Close() error { return f.k.Close() }

// kafkaFloorVersions are the versions the floor serves: offsetd's, so that
// clients send the same requests to both.
var kafkaFloorVersions = map[int16][2]int16{
	int16(kmsg.ApiVersions):     {0, 4},
	int16(kmsg.Metadata):        {0, 12},
	int16(kmsg.FindCoordinator): {0, 6},
	int16(kmsg.OffsetCommit):    {0, 9},
	int16(kmsg.OffsetFetch):     {0, 9},
}

// kafkaFloor is the floor's listener and its connections.
type kafkaFloor struct {
	ln    net.Listener
	host  string
	port  int32
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // guarded by mu
}

// serveKafkaFloor listens on 127.0.0.1 and serves every connection until
// Close: what a child process of kafkaFloorSystem runs.
func serveKafkaFloor() (childServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	f := &kafkaFloor{ln: ln, host: host, port: int32(p), conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.accept)
	return f, nil
}

func (f *kafkaFloor) addr() net.Addr { return f.ln.Addr() }

func (f *kafkaFloor) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		f.wg.Go(func() {
			defer func() {
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
				c.Close()
			}()
			f.serve(c)
		})
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (f *kafkaFloor) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

// serve answers c's requests one after the other until it closes or sends
// something the floor does not serve.
func (f *kafkaFloor) serve(c net.Conn) {
	r := bufio.NewReader(c)
	var frame, out []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 1<<20 {
			return
		}
		if cap(frame) < int(n) {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		var err error
		if out, err = f.answer(out[:0], frame); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

var errFloorRequest = errors.New("bench: the Kafka floor does not serve this request")

// answer decodes one request frame (without its size) and appends the
// framed response to out.
func (f *kafkaFloor) answer(out, frame []byte) ([]byte, error) {
	if len(frame) < 10 {
		return nil, errFloorRequest
	}
	key := int16(binary.BigEndian.Uint16(frame))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := frame[4:8]
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	body := frame[10:]
	if idLen > 0 {
		if idLen > len(body) {
			return nil, errFloorRequest
		}
		body = body[idLen:]
	}
	req := kmsg.RequestForKey(key)
	versions, served := kafkaFloorVersions[key]
	if req == nil || !served {
		return nil, errFloorRequest
	}
	if version < versions[0] || version > versions[1] {
		if key != int16(kmsg.ApiVersions) {
			return nil, errFloorRequest
		}
		// A newer ApiVersions than served: answer v0 with the versions,
		// as Kafka's negotiation has it.
		resp := f.apiVersions(kmsg.NewPtrApiVersionsResponse())
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return frameResponse(out, corr, resp, false), nil
	}
	req.SetVersion(version)
	if req.IsFlexible() { // a flexible request's header has tagged fields
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, err
	}
	var resp kmsg.Response
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp = f.apiVersions(req.ResponseKind().(*kmsg.ApiVersionsResponse))
	case *kmsg.MetadataRequest:
		resp = f.metadata(req)
	case *kmsg.FindCoordinatorRequest:
		resp = f.findCoordinator(req)
	case *kmsg.OffsetCommitRequest:
		resp = offsetCommitted(req)
	case *kmsg.OffsetFetchRequest:
		// Only for the clients' warm-up: nothing is stored, so nothing
		// is answered.
		resp = req.ResponseKind()
	}
	return frameResponse(out, corr, resp, resp.IsFlexible() && key != int16(kmsg.ApiVersions)), nil
}

// skipTags skips a flexible request header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, m := binary.Uvarint(b)
	if m <= 0 {
		return nil, errFloorRequest
	}
	b = b[m:]
	for range n {
		if _, m = binary.Uvarint(b); m <= 0 {
			return nil, errFloorRequest
		}
		b = b[m:]
		size, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < size {
			return nil, errFloorRequest
		}
		b = b[m+int(size):]
	}
	return b, nil
}

// frameResponse appends resp, with its size and header, to out.
func frameResponse(out, corr []byte, resp kmsg.Response, flexibleHeader bool) []byte {
	start := len(out)
	out = append(out, 0, 0, 0, 0)
	out = append(out, corr...)
	if flexibleHeader {
		out = append(out, 0) // no tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

func (f *kafkaFloor) apiVersions(resp *kmsg.ApiVersionsResponse) *kmsg.ApiVersionsResponse {
	for key, v := range kafkaFloorVersions {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, v[0], v[1]
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

// metadata answers as one broker, this one; every topic asked for exists,
// with no partitions.
func (f *kafkaFloor) metadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 0, f.host, f.port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	resp.ClusterID = kmsg.StringPtr("kafka-floor")
	for _, t := range req.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// findCoordinator names this broker for every key.
func (f *kafkaFloor) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID, resp.Host, resp.Port = 0, f.host, f.port
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = nil
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, 0, f.host, f.port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// offsetCommitted answers every partition of req as committed, storing
// nothing.
func offsetCommitted(req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		resp.Topics[i].Topic = t.Topic
		resp.Topics[i].Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			resp.Topics[i].Partitions[j].Partition = p.Partition
		}
	}
	return resp
}
