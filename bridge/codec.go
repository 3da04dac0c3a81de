package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
)

// frameHead is what Decode reads first: the type, which picks the Go type
// the whole frame is read into.
type frameHead struct {
	Type string `json:"type"`
}

// Decode reads one JSON frame into the type its "type" names. A worker
// shares its process with the code it runs, which can forge frames: anything
// but a JSON object of a known type is an error. Fields of other types are
// ignored, as JSON.parse's readers in the worker ignore them.
func Decode(data []byte) (Frame, error) {
	var head frameHead
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, malformed(err)
	}
	switch head.Type {
	case TypeHello:
		return decodeAs[HelloFrame](data)
	case TypeReady:
		return decodeAs[ReadyFrame](data)
	case TypeStandby:
		return decodeAs[StandbyFrame](data)
	case TypeRestore:
		return decodeAs[RestoreFrame](data)
	case TypeRecycle:
		return decodeAs[RecycleFrame](data)
	case TypeRecycled:
		return decodeAs[RecycledFrame](data)
	case TypeOutput:
		return decodeAs[OutputFrame](data)
	case TypeResult:
		return decodeAs[ResultFrame](data)
	case TypeFatal:
		return decodeAs[FatalFrame](data)
	case TypeRun:
		return decodeAs[RunFrame](data)
	case TypeImports:
		return decodeAs[ImportsFrame](data)
	case TypeInstall:
		return decodeAs[InstallFrame](data)
	case TypeInstalled:
		return decodeAs[InstalledFrame](data)
	case TypeInterrupt:
		return decodeAs[InterruptFrame](data)
	case TypePing:
		return decodeAs[PingFrame](data)
	case TypePong:
		return decodeAs[PongFrame](data)
	case TypePut:
		return decodeAs[PutFrame](data)
	case TypeFiles:
		return decodeAs[FilesFrame](data)
	case TypeSnapshot:
		return decodeAs[SnapshotFrame](data)
	case TypeToolCall:
		return decodeAs[ToolCallFrame](data)
	case TypeToolResult:
		return decodeAs[ToolResultFrame](data)
	case TypeAsk:
		return decodeAs[AskFrame](data)
	case TypeAnswer:
		return decodeAs[AnswerFrame](data)
	case TypeCompile:
		return decodeAs[CompileFrame](data)
	case TypeCompiled:
		return decodeAs[CompiledFrame](data)
	case TypeCompiling:
		return decodeAs[CompilingFrame](data)
	}
	return nil, fmt.Errorf("bridge: unknown frame type %q", head.Type)
}

// decodeAs reads data, a JSON object, into an F.
func decodeAs[F Frame](data []byte) (Frame, error) {
	var f F
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, malformed(err)
	}
	return f, nil
}

// malformed is the error of a frame that is not the JSON its type needs. Its
// text reaches the caller of a call whose code forged the frame.
func malformed(err error) error {
	return fmt.Errorf("bridge: malformed frame: %w", err)
}

// Encode writes f as one JSON object: "type" first, then f's fields as their
// json tags say, those that are zero left out. f is a value of one of the
// frame types, not a pointer.
func Encode(f Frame) ([]byte, error) {
	if f == nil {
		return nil, errors.New("bridge: encode a nil frame")
	}
	body, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("bridge: encode a %s frame: %w", f.Type(), err)
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("bridge: a %s frame is not a JSON object", f.Type())
	}
	typ, err := json.Marshal(f.Type())
	if err != nil {
		return nil, fmt.Errorf("bridge: encode a %s frame: %w", f.Type(), err)
	}
	// The fields' object with the type spliced in front: one pass over the
	// fields, and the bytes a struct with a leading Type field would give.
	out := make([]byte, 0, len(`{"type":,`)+len(typ)+len(body))
	out = append(append(out, `{"type":`...), typ...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}
