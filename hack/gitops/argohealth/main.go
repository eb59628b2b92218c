// Command argohealth runs an Argo CD resource health check (a health.lua) on Kubernetes
// objects the way Argo CD runs it (argo-cd util/lua/lua.go, VM.ExecuteHealthLua), with the
// Lua interpreter Argo CD embeds (github.com/yuin/gopher-lua, the version its go.mod pins):
//
//   - a fresh interpreter per object, the standard libraries off except package, base and
//     table (Argo CD also opens a reduced os library: a script that needs it fails here);
//     the json module preloaded (layeh.com/gopher-json); a one-second deadline;
//   - the object in the global obj, as Lua tables (integers become numbers);
//   - the script's return value must be a table; it is JSON-encoded and read as Argo CD's
//     HealthStatus {status, message}; a status outside Argo CD's codes becomes Unknown.
//
// Usage: argohealth -script health.lua < objects.json
// Output: one JSON object per input object: {"namespace", "name", "status", "message"}.
// Exit 0 when the script ran on every object; 1 with one line on stderr otherwise.
//
// Usage: argohealth -tests health_test.yaml
// Runs Argo CD's test file of a resource customization (beside its health.lua: each test's
// inputPath and the healthStatus expected, status and message), as Argo CD's own test of its
// built-in checks does; one line per failure, exit 1 if any.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/yaml"

	"orca.local/hack/gitops/internal/objects"
)

// Argo CD's health codes (gitops-engine pkg/health HealthStatusCode) a script may return.
var validCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true,
	"Healthy": true, "Degraded": true, "Missing": true,
}

const invalidHealthStatus = "Lua returned an invalid health status"

type health struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

type result struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

// toLua converts a decoded object's values to Lua values, as Argo CD does for obj.
func toLua(l *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case json.Number:
		return lua.LString(v)
	case []interface{}:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]interface{}:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetH(lua.LString(key), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

func run(script string, u *unstructured.Unstructured) (*health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name))
		if err != nil {
			return nil, err
		}
	}
	luajson.Preload(l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, u.Object))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	value := l.Get(-1)
	if value.Type() != lua.LTTable {
		return nil, fmt.Errorf("expect table output from Lua script, not %s", value.Type())
	}
	data, err := luajson.Encode(value)
	if err != nil {
		return nil, err
	}
	h := &health{}
	if err := json.Unmarshal(data, h); err != nil {
		return nil, err
	}
	if !validCodes[h.Status] {
		return &health{Status: "Unknown", Message: invalidHealthStatus}, nil
	}
	return h, nil
}

// testFile is Argo CD's health_test.yaml.
type testFile struct {
	Tests []struct {
		HealthStatus health `json:"healthStatus"`
		InputPath    string `json:"inputPath"`
	} `json:"tests"`
}

// runTests checks every test of a health_test.yaml against the health.lua beside it.
func runTests(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "argohealth: %v\n", err)
		return 1
	}
	var tests testFile
	if err := yaml.UnmarshalStrict(data, &tests); err != nil {
		fmt.Fprintf(os.Stderr, "argohealth: %s: %v\n", path, err)
		return 1
	}
	dir := filepath.Dir(path)
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "argohealth: %v\n", err)
		return 1
	}
	if len(tests.Tests) == 0 {
		fmt.Fprintf(os.Stderr, "argohealth: %s: no tests\n", path)
		return 1
	}
	failed := 0
	for _, test := range tests.Tests {
		input, err := os.Open(filepath.Join(dir, test.InputPath))
		if err != nil {
			fmt.Fprintf(os.Stderr, "argohealth: %v\n", err)
			return 1
		}
		objs, err := objects.Read(input)
		input.Close()
		if err != nil || len(objs) != 1 {
			fmt.Fprintf(os.Stderr, "argohealth: %s: want one object (%v)\n", test.InputPath, err)
			return 1
		}
		got, err := run(string(script), objs[0])
		if err != nil {
			fmt.Fprintf(os.Stderr, "argohealth: %s: %v\n", test.InputPath, err)
			return 1
		}
		if *got != test.HealthStatus {
			failed++
			fmt.Printf("FAIL %s: got %s %q, want %s %q\n", test.InputPath, got.Status, got.Message,
				test.HealthStatus.Status, test.HealthStatus.Message)
		} else {
			fmt.Printf("ok   %s: %s\n", test.InputPath, got.Status)
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func main() {
	scriptPath := flag.String("script", "", "the health.lua to run on the objects on stdin")
	testsPath := flag.String("tests", "", "an Argo CD health_test.yaml to run instead")
	flag.Parse()
	if *testsPath != "" && *scriptPath == "" && flag.NArg() == 0 {
		os.Exit(runTests(*testsPath))
	}
	if *scriptPath == "" || *testsPath != "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: argohealth -script health.lua < objects.json | argohealth -tests health_test.yaml")
		os.Exit(2)
	}
	script, err := os.ReadFile(*scriptPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "argohealth: %v\n", err)
		os.Exit(1)
	}
	objs, err := objects.Read(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "argohealth: %v\n", err)
		os.Exit(1)
	}
	encoder := json.NewEncoder(os.Stdout)
	for _, u := range objs {
		h, err := run(string(script), u)
		if err != nil {
			fmt.Fprintf(os.Stderr, "argohealth: %s/%s: %v\n", u.GetNamespace(), u.GetName(), err)
			os.Exit(1)
		}
		if err := encoder.Encode(result{u.GetNamespace(), u.GetName(), h.Status, h.Message}); err != nil {
			fmt.Fprintf(os.Stderr, "argohealth: %v\n", err)
			os.Exit(1)
		}
	}
}
