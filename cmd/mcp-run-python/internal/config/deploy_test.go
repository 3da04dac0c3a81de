package config

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestServiceDefinitions checks the service definitions in deploy/ against
// the program: every MCP_RUN_PYTHON_* variable they set stands for a flag,
// and the mode they run exists. A typo there would be ignored in silence.
func TestServiceDefinitions(t *testing.T) {
	usage := Usage()
	checkVariable := func(file, name string) {
		t.Helper()
		flag := "--" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "_", "-")
		if !strings.Contains(usage, flag+" ") {
			t.Errorf("%s sets %s, but there is no flag %s", file, name, flag)
		}
	}
	checkMode := func(file, mode string) {
		t.Helper()
		if m, ok := parseMode(mode); !ok || m == ModeStdio {
			t.Errorf("%s runs mode %q, want a server mode other than stdio", file, mode)
		}
	}

	t.Run("systemd", func(t *testing.T) {
		const file = "mcp-run-python.service"
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", file))
		if err != nil {
			t.Fatal(err)
		}
		variables := regexp.MustCompile(`(?m)^#?Environment=(`+EnvPrefix+`[A-Z_]+)=`).FindAllStringSubmatch(string(data), -1)
		if len(variables) == 0 {
			t.Errorf("%s sets no %s variables", file, EnvPrefix)
		}
		for _, v := range variables {
			checkVariable(file, v[1])
		}
		// The settings commented out are the defaults, as the unit says:
		// each, set, changes nothing.
		parse := func(vars map[string]string) Config {
			t.Helper()
			cfg, err := Parse([]string{"streamable_http"}, withVars(standardEnv(), vars).environment())
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			// The supervisor's defaults, which a unit may state.
			if cfg.Supervisor.Warm == 0 {
				cfg.Supervisor.Warm = cfg.Supervisor.Workers
			}
			if cfg.Supervisor.Queue == 0 {
				cfg.Supervisor.Queue = queuePerWorker * cfg.Supervisor.Workers
			}
			cfg.given = nil // as given, not what it comes to
			return cfg
		}
		defaults := parse(nil)
		for _, v := range regexp.MustCompile(`(?m)^#Environment=(`+EnvPrefix+`[A-Z_]+)=(.*)$`).FindAllStringSubmatch(string(data), -1) {
			if got := parse(map[string]string{v[1]: v[2]}); !reflect.DeepEqual(got, defaults) {
				t.Errorf("%s gives %s=%s as a default, but it is not the default", file, v[1], v[2])
			}
		}
		exec := regexp.MustCompile(`(?m)^ExecStart=\S+ (\S+)$`).FindStringSubmatch(string(data))
		if exec == nil {
			t.Fatalf("%s has no ExecStart with a mode", file)
		}
		checkMode(file, exec[1])
	})

	t.Run("launchd", func(t *testing.T) {
		const file = "io.github.mcp-run-python.plist"
		f, err := os.Open(filepath.Join("..", "..", "..", "..", "deploy", file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// The plist as the text of its elements in order: keys and values.
		type item struct{ element, text string }
		var items []item
		dec := xml.NewDecoder(f)
		var element string
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				element = tok.Name.Local
				items = append(items, item{element: element})
			case xml.CharData:
				if len(items) > 0 && element != "" {
					items[len(items)-1].text += string(tok)
				}
			case xml.EndElement:
				element = ""
			}
		}
		value := func(key string) []item {
			for i, it := range items {
				if it.element == "key" && it.text == key {
					return items[i+1:]
				}
			}
			t.Fatalf("%s has no key %s", file, key)
			return nil
		}
		if label := value("Label")[0].text; label+".plist" != file {
			t.Errorf("%s has the label %q; launchctl wants the file named after it", file, label)
		}
		args := value("ProgramArguments")
		if len(args) < 3 || args[1].text != "/usr/local/bin/mcp-run-python" {
			t.Fatalf("%s: ProgramArguments %v, want /usr/local/bin/mcp-run-python and a mode", file, args)
		}
		checkMode(file, args[2].text)
		var found int
		for _, it := range items {
			if it.element == "key" && strings.HasPrefix(it.text, EnvPrefix) {
				checkVariable(file, it.text)
				found++
			}
		}
		if found == 0 {
			t.Errorf("%s sets no %s variables", file, EnvPrefix)
		}
	})
}
