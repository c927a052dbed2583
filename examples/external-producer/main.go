// Command external-producer publishes one agent session (SessionOpened, multi-turn
// StepCaptured events with delta-encoded prompts, SessionClosed) to rllm.session-events,
// written straight to Kafka in Avro single-object encoding: the .avsc files are the
// contract, no rllm code is involved. Each event id is printed as a JSON line.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// schemaFiles lists the records SessionEvent needs, dependencies first.
var schemaFiles = []string{
	"ApiKind", "TokenStatus", "SessionStatus", "Usage", "StepError", "Task",
	"SessionOpened", "StepCaptured", "SessionClosed", "RewardAssigned", "SessionEvent",
}

type Task struct {
	TaskID          string  `avro:"task_id"`
	Instruction     string  `avro:"instruction"`
	GroundTruthJSON *string `avro:"ground_truth_json"`
	RewardFn        *string `avro:"reward_fn"`
	Benchmark       *string `avro:"benchmark"`
	MetadataJSON    string  `avro:"metadata_json"`
}

type SessionOpened struct {
	Task           Task    `avro:"task"`
	RolloutIndex   int32   `avro:"rollout_index"`
	GroupSize      int32   `avro:"group_size"`
	TrajectoryName string  `avro:"trajectory_name"`
	Agent          string  `avro:"agent"`
	PolicyVersion  int64   `avro:"policy_version"`
	Model          *string `avro:"model"`
	MetadataJSON   string  `avro:"metadata_json"`
}

type Usage struct {
	PromptTokens     int32 `avro:"prompt_tokens"`
	CompletionTokens int32 `avro:"completion_tokens"`
	CachedTokens     int32 `avro:"cached_tokens"`
}

type StepError struct {
	Kind       string `avro:"kind"`
	Message    string `avro:"message"`
	StatusCode *int32 `avro:"status_code"`
}

type StepCaptured struct {
	StepID             string     `avro:"step_id"`
	StepIndex          int32      `avro:"step_index"`
	ParentStepID       *string    `avro:"parent_step_id"`
	API                string     `avro:"api"`
	Model              string     `avro:"model"`
	RequestJSON        string     `avro:"request_json"`
	ResponseJSON       string     `avro:"response_json"`
	PromptTokenIDs     []byte     `avro:"prompt_token_ids"`
	PromptPrefixLen    int32      `avro:"prompt_prefix_len"`
	ResponseTokenIDs   []byte     `avro:"response_token_ids"`
	ResponseLogprobs   []byte     `avro:"response_logprobs"`
	FinishReason       *string    `avro:"finish_reason"`
	SamplingParamsJSON string     `avro:"sampling_params_json"`
	PolicyVersion      int64      `avro:"policy_version"`
	Upstream           string     `avro:"upstream"`
	StartedAt          time.Time  `avro:"started_at"`
	LatencyMs          float64    `avro:"latency_ms"`
	TtftMs             *float64   `avro:"ttft_ms"`
	OverheadMs         float64    `avro:"overhead_ms"`
	Usage              Usage      `avro:"usage"`
	TokenStatus        string     `avro:"token_status"`
	Error              *StepError `avro:"error"`
}

type SessionClosed struct {
	Status     string  `avro:"status"`
	OutputJSON *string `avro:"output_json"`
	Error      *string `avro:"error"`
	NumSteps   int32   `avro:"num_steps"`
}

type SessionEvent struct {
	EventID   string    `avro:"event_id"`
	SessionID string    `avro:"session_id"`
	RunID     string    `avro:"run_id"`
	EmittedAt time.Time `avro:"emitted_at"`
	Producer  string    `avro:"producer"`
	Payload   any       `avro:"payload"`
}

// packInt32 packs token IDs as little-endian int32, the layout the schema documents.
func packInt32(ids []int32) []byte {
	out := make([]byte, 4*len(ids))
	for i, v := range ids {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
	}
	return out
}

// packFloat32 packs logprobs as little-endian float32.
func packFloat32(xs []float32) []byte {
	out := make([]byte, 4*len(xs))
	for i, v := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

func str(s string) *string { return &s }

// logicalPrimitive matches a primitive type annotated with a logical type.
var logicalPrimitive = regexp.MustCompile(`\{"type":"(\w+)","logicalType":"[\w-]+"\}`)

// singleObjectFingerprint is the CRC-64-AVRO fingerprint (little-endian) of the schema's
// Parsing Canonical Form, as single-object encoding requires. The spec's canonical form
// drops logical types; hamba's String() keeps them, so they are reduced here first.
func singleObjectFingerprint(schema avro.Schema) []byte {
	canonical := logicalPrimitive.ReplaceAllString(schema.String(), `"$1"`)
	const empty = 0xc15d213aa4d7a795
	var table [256]uint64
	for i := range table {
		fp := uint64(i)
		for j := 0; j < 8; j++ {
			fp = (fp >> 1) ^ (empty & -(fp & 1))
		}
		table[i] = fp
	}
	fp := uint64(empty)
	for _, b := range []byte(canonical) {
		fp = (fp >> 8) ^ table[(byte(fp)^b)&0xff]
	}
	out := make([]byte, 8)
	binary.LittleEndian.PutUint64(out, fp)
	return out
}

// session builds the events of one session: open, steps turns, close.
func session(sessionID, runID string, steps int) []SessionEvent {
	now := time.Now().UTC().Truncate(time.Microsecond)
	ev := func(i int, payload any) SessionEvent {
		return SessionEvent{EventID: fmt.Sprintf("%s-go-%d", sessionID, i), SessionID: sessionID,
			RunID: runID, EmittedAt: now, Producer: "go-example", Payload: payload}
	}
	events := []SessionEvent{ev(0, SessionOpened{
		Task:      Task{TaskID: "go-task", Instruction: "What is 7*8?", GroundTruthJSON: str("\"56\""), MetadataJSON: "{}"},
		GroupSize: 1, TrajectoryName: "default", Agent: "go-example", Model: str("demo-model"),
		MetadataJSON: "{}",
	})}
	var previous []int32 // the parent's full prompt + response
	var parent *string
	for i := 0; i < steps; i++ {
		suffix := []int32{1, 15, 27, 99, 4}
		if i > 0 {
			suffix = []int32{7, int32(8 + i)}
		}
		response := []int32{int32(100 + i), int32(200 + i), 2}
		stepID := fmt.Sprintf("%s:go-step-%d", sessionID, i)
		full := append(append([]int32{}, previous...), suffix...)
		events = append(events, ev(i+1, StepCaptured{
			StepID: stepID, StepIndex: int32(i), ParentStepID: parent, API: "chat",
			Model: "demo-model", RequestJSON: "{}", ResponseJSON: "{}",
			PromptTokenIDs: packInt32(suffix), PromptPrefixLen: int32(len(previous)),
			ResponseTokenIDs: packInt32(response),
			ResponseLogprobs: packFloat32([]float32{-0.25, -0.5, -0.01}),
			FinishReason:     str("stop"), SamplingParamsJSON: "{}", Upstream: "go",
			StartedAt: now, Usage: Usage{PromptTokens: int32(len(full)), CompletionTokens: 3},
			TokenStatus: "ok",
		}))
		previous = append(full, response...)
		parent = str(stepID)
	}
	return append(events, ev(steps+1, SessionClosed{Status: "ok", OutputJSON: str("\"56\""), NumSteps: int32(steps)}))
}

func run() error {
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka bootstrap host:port")
	topic := flag.String("topic", "rllm.session-events", "full topic name (prefix included)")
	schemas := flag.String("schemas", "../../rllm/schemas/avro", "folder of the .avsc files")
	sessionID := flag.String("session", "go/session-1", "session id (the Kafka key)")
	runID := flag.String("run", "go-run", "run id")
	steps := flag.Int("steps", 3, "steps in the session")
	flag.Parse()

	paths := make([]string, len(schemaFiles))
	for i, name := range schemaFiles {
		paths[i] = filepath.Join(*schemas, "rllm.events."+name+".avsc")
	}
	schema, err := avro.ParseFiles(paths...)
	if err != nil {
		return fmt.Errorf("parsing schemas in %s: %w", *schemas, err)
	}
	avro.Register("rllm.events.SessionOpened", SessionOpened{})
	avro.Register("rllm.events.StepCaptured", StepCaptured{})
	avro.Register("rllm.events.SessionClosed", SessionClosed{})
	header := append([]byte{0xC3, 0x01}, singleObjectFingerprint(schema)...)

	client, err := kgo.NewClient(kgo.SeedBrokers(*brokers), kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	for _, event := range session(*sessionID, *runID, *steps) {
		body, err := avro.Marshal(schema, event)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", event.EventID, err)
		}
		value := append(append([]byte{}, header...), body...)
		record := &kgo.Record{Key: []byte(event.SessionID), Value: value}
		if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
			return fmt.Errorf("producing %s: %w", event.EventID, err)
		}
		if err := out.Encode(map[string]any{"event_id": event.EventID, "offset": record.Offset}); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
