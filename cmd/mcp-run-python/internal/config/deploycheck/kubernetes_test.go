package deploycheck

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
)

// The container image (Dockerfile) and the Kubernetes manifests
// (deploy/kubernetes/) are checked here against the program: what they pass
// it goes through its own flag parser, and the ports, probes, volumes,
// memory and users they declare must agree with what that gives. A manifest
// that Kubernetes would reject, or that the program would read otherwise
// than its comments say, fails here rather than in a cluster.

// repoRoot is the repository, from this package's directory.
var repoRoot = filepath.Join("..", "..", "..", "..", "..")

// kubeDir holds the Kubernetes manifests.
var kubeDir = filepath.Join(repoRoot, "deploy", "kubernetes")

// appName is the app.kubernetes.io/name of every object.
const appName = "mcp-run-python"

// What the memory request counts for a worker (a margin over a restored
// worker at rest, 150-176 MiB: docs/DEPLOY.md, "Resources") and for the Go
// front end. The limit's headroom covers the front end above the workers'
// --memory-limit.
var (
	workerMemory     = resource.MustParse("240Mi")
	frontEndMemory   = resource.MustParse("40Mi")
	frontEndHeadroom = resource.MustParse("64Mi")
)

// stopMargin is what the pod's grace period must keep after the preStop
// hook, --shutdown-timeout and --grace, for the workers to stop.
const stopMargin = 5 * time.Second

// manifestKinds are the kinds of object a manifest may hold, each with its
// apiVersion and the type it decodes into.
var manifestKinds = map[string]struct {
	apiVersion string
	decode     func() any
}{
	"Deployment":              {"apps/v1", func() any { return new(appsv1.Deployment) }},
	"Service":                 {"v1", func() any { return new(corev1.Service) }},
	"HorizontalPodAutoscaler": {"autoscaling/v2", func() any { return new(autoscalingv2.HorizontalPodAutoscaler) }},
	"PodDisruptionBudget":     {"policy/v1", func() any { return new(policyv1.PodDisruptionBudget) }},
	"NetworkPolicy":           {"networking.k8s.io/v1", func() any { return new(networkingv1.NetworkPolicy) }},
}

// kustomizationFile lists the manifests for `kubectl apply -k`.
const kustomizationFile = "kustomization.yaml"

// manifestVariants are manifests that kustomization.yaml leaves out because
// each replaces another when listed in its place: the variant → the one
// it replaces.
var manifestVariants = map[string]string{
	"hpa-custom-metrics.yaml": "hpa.yaml",
}

// kustomization is the part of a Kustomization the manifests use; decoding
// is strict, so anything else in the file fails the test until added here.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// documentSeparator separates YAML documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// yamlDocuments counts the documents of data that hold more than comments.
func yamlDocuments(data []byte) int {
	n := 0
	for _, doc := range documentSeparator.Split(string(data), -1) {
		for _, line := range strings.Split(doc, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				n++
				break
			}
		}
	}
	return n
}

// decodeManifest decodes one object strictly into its API type, by kind:
// an unknown kind, another apiVersion, an unknown or duplicate field, or a
// second document is an error.
func decodeManifest(data []byte) (kind string, obj any, err error) {
	if n := yamlDocuments(data); n != 1 {
		return "", nil, fmt.Errorf("%d YAML documents, want one: one object a file", n)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return "", nil, err
	}
	k, ok := manifestKinds[tm.Kind]
	if !ok {
		return "", nil, fmt.Errorf("unknown kind %q (apiVersion %q)", tm.Kind, tm.APIVersion)
	}
	if tm.APIVersion != k.apiVersion {
		return "", nil, fmt.Errorf("%s has apiVersion %q, want %q", tm.Kind, tm.APIVersion, k.apiVersion)
	}
	obj = k.decode()
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return "", nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return tm.Kind, obj, nil
}

// kube is every file of deploy/kubernetes, decoded.
type kube struct {
	kustomization kustomization
	deployment    *appsv1.Deployment
	service       *corev1.Service
	pdb           *policyv1.PodDisruptionBudget
	networkPolicy *networkingv1.NetworkPolicy
	hpas          map[string]*autoscalingv2.HorizontalPodAutoscaler // by file
	objects       map[string]metav1.Object                          // by file
}

// loadKube reads and decodes deploy/kubernetes, failing on any file it
// cannot place.
func loadKube(t *testing.T) kube {
	t.Helper()
	entries, err := os.ReadDir(kubeDir)
	if err != nil {
		t.Fatal(err)
	}
	k := kube{hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, objects: map[string]metav1.Object{}}
	one := func(file string, have bool) {
		t.Helper()
		if have {
			t.Fatalf("%s: a second object of its kind; the tests expect one", file)
		}
	}
	for _, e := range entries {
		file := e.Name()
		if e.IsDir() || filepath.Ext(file) != ".yaml" {
			t.Errorf("%s: unexpected in %s (only .yaml manifests, and docs/DEPLOY.md for the text)", file, kubeDir)
			continue
		}
		data, err := os.ReadFile(filepath.Join(kubeDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if file == kustomizationFile {
			if err := yaml.UnmarshalStrict(data, &k.kustomization); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			continue
		}
		kind, obj, err := decodeManifest(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			one(file, k.deployment != nil)
			k.deployment = o
		case *corev1.Service:
			one(file, k.service != nil)
			k.service = o
		case *policyv1.PodDisruptionBudget:
			one(file, k.pdb != nil)
			k.pdb = o
		case *networkingv1.NetworkPolicy:
			one(file, k.networkPolicy != nil)
			k.networkPolicy = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			k.hpas[file] = o
		default:
			t.Fatalf("%s: kind %s decoded but not handled by the tests", file, kind)
		}
		k.objects[file] = obj.(metav1.Object)
	}
	switch {
	case k.deployment == nil:
		t.Fatal("no Deployment in " + kubeDir)
	case k.service == nil:
		t.Fatal("no Service in " + kubeDir)
	case k.pdb == nil:
		t.Fatal("no PodDisruptionBudget in " + kubeDir)
	case k.networkPolicy == nil:
		t.Fatal("no NetworkPolicy in " + kubeDir)
	case k.hpas["hpa.yaml"] == nil:
		t.Fatal("no HorizontalPodAutoscaler in hpa.yaml")
	}
	return k
}

// container returns the pod's container named name, or fails.
func (k kube) container(t *testing.T, name string, init bool) corev1.Container {
	t.Helper()
	list := k.deployment.Spec.Template.Spec.Containers
	if init {
		list = k.deployment.Spec.Template.Spec.InitContainers
	}
	for _, c := range list {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment.yaml has no container %q (init: %v)", name, init)
	return corev1.Container{}
}

// server is the container that runs mcp-run-python: the only one.
func (k kube) server(t *testing.T) corev1.Container {
	t.Helper()
	cs := k.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("deployment.yaml has %d containers, want 1 (the server)", len(cs))
	}
	return cs[0]
}

// podLabels are the labels of the Deployment's pods.
func (k kube) podLabels() labels.Set { return k.deployment.Spec.Template.Labels }

// portNumber resolves a port, by number or by the name of one of c's ports.
func portNumber(t *testing.T, c corev1.Container, port intstr.IntOrString) int {
	t.Helper()
	if port.Type == intstr.Int {
		return port.IntValue()
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort)
		}
	}
	t.Fatalf("port %q is not a port of container %s", port.StrVal, c.Name)
	return 0
}

// flagVariables are the MCP_RUN_PYTHON_* variables that stand for flags.
func flagVariables() map[string]bool { return config.FlagVariables("linux") }

// serviceLinkVariables are the variables the kubelet gives a pod for svc
// unless enableServiceLinks is false, as docker links named them: for the
// Service mcp-run-python, MCP_RUN_PYTHON_PORT=tcp://..., which the program
// reads as --port.
func serviceLinkVariables(svc *corev1.Service) map[string]string {
	prefix := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_")) + "_"
	const ip = "10.96.0.10"
	vars := map[string]string{prefix + "SERVICE_HOST": ip}
	for i, p := range svc.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		base := prefix + "PORT_" + port + "_" + strings.ToUpper(proto)
		if i == 0 {
			vars[prefix+"SERVICE_PORT"] = port
			vars[prefix+"PORT"] = proto + "://" + ip + ":" + port
		}
		if p.Name != "" {
			vars[prefix+"SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = port
		}
		vars[base] = proto + "://" + ip + ":" + port
		vars[base+"_PROTO"] = proto
		vars[base+"_PORT"] = port
		vars[base+"_ADDR"] = ip
	}
	return vars
}

// mergeVars returns the variables of all maps, later ones winning.
func mergeVars(maps ...map[string]string) map[string]string {
	all := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			all[k] = v
		}
	}
	return all
}

// environmentOf is a container's environment for Parse: its variables, no
// deno on PATH (the image sets MCP_RUN_PYTHON_DENO) and no user cache
// directory (it sets the cache), so that nothing depends on this machine.
func environmentOf(vars map[string]string) config.Environment {
	return config.Environment{
		LookupEnv: func(key string) (string, bool) {
			v, ok := vars[key]
			return v, ok
		},
		LookPath:     func(string) (string, error) { return "", errors.New("not on PATH") },
		UserCacheDir: func() (string, error) { return "", errors.New("no user cache directory") },
		UserHomeDir: func() (string, error) {
			if vars["HOME"] == "" {
				return "", errors.New("no HOME")
			}
			return vars["HOME"], nil
		},
	}
}

// parseContainer parses args as the container's program would, on Linux.
func parseContainer(t *testing.T, what string, args []string, vars map[string]string) config.Config {
	t.Helper()
	cfg, err := config.ParseGOOS(args, environmentOf(vars), "linux")
	if err != nil {
		t.Fatalf("%s: the program refuses %q: %v", what, args, err)
	}
	return cfg
}

// isHTTPMode reports whether m serves HTTP, and so the probes.
func isHTTPMode(m config.Mode) bool {
	return m == config.ModeStreamableHTTP || m == config.ModeStreamableHTTPStateless || m == config.ModeSSE
}

// containerVariables are the container's own variables, which must be
// plain values.
func containerVariables(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil || strings.Contains(e.Value, "$(") {
			t.Errorf("container %s: variable %s is not a plain value; the tests cannot know it", c.Name, e.Name)
			continue
		}
		vars[e.Name] = e.Value
	}
	if len(c.EnvFrom) > 0 {
		t.Errorf("container %s: envFrom: the tests cannot know those variables", c.Name)
	}
	return vars
}

// serverVariables are the server container's whole environment: the
// image's ENV, the container's env, and the Service's link variables when
// the pod takes them.
func serverVariables(t *testing.T, k kube, img dockerfile) map[string]string {
	t.Helper()
	vars := mergeVars(img.env, containerVariables(t, k.server(t)))
	if links := k.deployment.Spec.Template.Spec.EnableServiceLinks; links == nil || *links {
		vars = mergeVars(serviceLinkVariables(k.service), vars)
	}
	return vars
}

// serverConfig is what the server container's args parse to.
func serverConfig(t *testing.T, k kube, img dockerfile) config.Config {
	t.Helper()
	c := k.server(t)
	if len(c.Command) > 0 {
		t.Fatalf("deployment.yaml: container %s sets command %q; keep the image's entrypoint and set args", c.Name, c.Command)
	}
	return parseContainer(t, "deployment.yaml", c.Args, serverVariables(t, k, img))
}

// probePaths are the paths of the probe endpoints as package transport
// declares them (probes.go), by constant name.
func probePaths(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "cmd", "mcp-run-python", "internal", "transport", "probes.go"))
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\w+Path)\s*=\s*"([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		paths[m[1]] = m[2]
	}
	for _, name := range []string{"healthzPath", "readyzPath", "metricsPath"} {
		if paths[name] == "" {
			t.Fatalf("transport/probes.go declares no %s", name)
		}
	}
	return paths
}

// supervisorMetrics are the metric names that supervisor/metrics.go
// registers, and the states of mcp_run_python_workers.
func supervisorMetrics(t *testing.T) (names, workerStates map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "supervisor", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	names, workerStates = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`Name:\s*"(mcp_run_python_\w+)"`).FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`workers\("(\w+)"`).FindAllStringSubmatch(string(data), -1) {
		workerStates[m[1]] = true
	}
	if len(names) == 0 || len(workerStates) == 0 {
		t.Fatal("supervisor/metrics.go: no metric names or worker states found; update the patterns")
	}
	return names, workerStates
}

// TestKubernetesDecoderRejects shows that the decoding the other tests rely
// on is strict.
func TestKubernetesDecoderRejects(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "unknown kind"},
		{"no kind", "metadata: {name: x}\n", "unknown kind"},
		{"old apiVersion", "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: x}\n", "want \"autoscaling/v2\""},
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {sessionAfinity: ClientIP}\n", "unknown field"},
		{"misplaced field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {readOnlyRootFilesystem: true}}}\n", "unknown field"},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n", "already set"},
		{"no document", "# only a comment\n---\n", "0 YAML documents"},
		{"two documents", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: y}\n", "2 YAML documents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeManifest([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decodeManifest: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, _, err := decodeManifest([]byte("# a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {name: x}\n")); err != nil {
		t.Errorf("a leading --- after comments: %v", err)
	}
}

// TestKubernetesFiles checks that every file of deploy/kubernetes decodes
// (loadKube), that kustomization.yaml lists exactly the manifests, and
// that every object carries the app's labels.
func TestKubernetesFiles(t *testing.T) {
	k := loadKube(t)
	kz := k.kustomization
	if kz.APIVersion != "kustomize.config.k8s.io/v1beta1" || kz.Kind != "Kustomization" {
		t.Errorf("%s: %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", kustomizationFile, kz.APIVersion, kz.Kind)
	}
	if kz.Namespace != "" {
		t.Errorf("%s sets namespace %q; the manifests are namespace-agnostic (kubectl apply -n)", kustomizationFile, kz.Namespace)
	}
	var want []string
	for file := range k.objects {
		if _, variant := manifestVariants[file]; !variant {
			want = append(want, file)
		}
	}
	got := slices.Clone(kz.Resources)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s lists %q, want every manifest but the variants: %q", kustomizationFile, got, want)
	}
	for variant, replaced := range manifestVariants {
		v, r := k.objects[variant], k.objects[replaced]
		if v == nil || r == nil {
			t.Errorf("variant %s of %s: one of them is missing", variant, replaced)
			continue
		}
		if v.GetName() != r.GetName() {
			t.Errorf("%s is named %q, %s %q: a variant takes the name of what it replaces", variant, v.GetName(), replaced, r.GetName())
		}
	}
	for file, obj := range k.objects {
		if obj.GetNamespace() != "" {
			t.Errorf("%s sets namespace %q; the manifests are namespace-agnostic", file, obj.GetNamespace())
		}
		if got := obj.GetLabels()["app.kubernetes.io/name"]; got != appName {
			t.Errorf("%s: label app.kubernetes.io/name is %q, want %q", file, got, appName)
		}
	}
	image := k.server(t).Image
	for _, c := range k.deployment.Spec.Template.Spec.InitContainers {
		if c.Image != image {
			t.Errorf("init container %s runs %q, the server %q: the warm cache must come from the server's image", c.Name, c.Image, image)
		}
	}
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	if len(kz.Images) != 1 || kz.Images[0].Name != name {
		t.Errorf("%s: images should name the server's image %q once, so that `kustomize edit set image` changes it", kustomizationFile, name)
	}
}

// TestKubernetesSelectors checks that every selector picks the Deployment's
// pods, and that the autoscalers scale that Deployment.
func TestKubernetesSelectors(t *testing.T) {
	k := loadKube(t)
	pods := k.podLabels()
	if pods["app.kubernetes.io/name"] != appName {
		t.Fatalf("deployment.yaml: the pods' app.kubernetes.io/name is %q, want %q", pods["app.kubernetes.io/name"], appName)
	}
	selectors := []struct {
		what     string
		selector *metav1.LabelSelector
	}{
		{"deployment.yaml spec.selector", k.deployment.Spec.Selector},
		{"service.yaml spec.selector", &metav1.LabelSelector{MatchLabels: k.service.Spec.Selector}},
		{"pdb.yaml spec.selector", k.pdb.Spec.Selector},
		{"networkpolicy.yaml spec.podSelector", &k.networkPolicy.Spec.PodSelector},
	}
	for _, c := range k.deployment.Spec.Template.Spec.TopologySpreadConstraints {
		selectors = append(selectors, struct {
			what     string
			selector *metav1.LabelSelector
		}{"deployment.yaml topologySpreadConstraints " + c.TopologyKey, c.LabelSelector})
	}
	for _, s := range selectors {
		if s.selector == nil || len(s.selector.MatchLabels)+len(s.selector.MatchExpressions) == 0 {
			// An empty selector picks every pod of the namespace.
			t.Errorf("%s is empty", s.what)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.selector)
		if err != nil {
			t.Errorf("%s: %v", s.what, err)
			continue
		}
		if !sel.Matches(pods) {
			t.Errorf("%s (%s) does not select the pods (%s)", s.what, sel, pods)
		}
	}
	for file, hpa := range k.hpas {
		ref := hpa.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != k.deployment.Name {
			t.Errorf("%s scales %s %s %q, want apps/v1 Deployment %q", file, ref.APIVersion, ref.Kind, ref.Name, k.deployment.Name)
		}
	}
}

// TestKubernetesDeployment checks the Deployment against the program: its
// args parse to an HTTP mode whose port, probes, shutdown, memory and
// writable paths the pod agrees with.
func TestKubernetesDeployment(t *testing.T) {
	k := loadKube(t)
	img := loadDockerfile(t)
	spec := k.deployment.Spec.Template.Spec
	c := k.server(t)
	cfg := serverConfig(t, k, img)

	t.Run("args", func(t *testing.T) {
		if !isHTTPMode(cfg.Mode) {
			t.Errorf("mode %q, want an HTTP mode", cfg.Mode)
		}
		if cfg.Host != "0.0.0.0" {
			t.Errorf("--host %q: the kubelet and the Service reach the pod on its own address; want 0.0.0.0", cfg.Host)
		}
		if cfg.Supervisor.Networking {
			t.Error("Python code has network access: the NetworkPolicy's claim needs --disable-networking")
		}
		// The autoscaler runs several replicas, and the Service routes
		// requests to any of them.
		if cfg.Mode != config.ModeStreamableHTTPStateless {
			t.Errorf("mode %q keeps MCP sessions in one replica; with several, requests need routing (docs/DEPLOY.md)", cfg.Mode)
		}
		if cfg.Sessions {
			t.Error("--sessions keeps Python sessions in one replica; with several, calls need routing (docs/DEPLOY.md)")
		}
		if k.deployment.Spec.Replicas != nil {
			t.Errorf("deployment.yaml sets replicas %d; the HorizontalPodAutoscaler owns the count", *k.deployment.Spec.Replicas)
		}
		flags := flagVariables()
		for name := range containerVariables(t, c) {
			if strings.HasPrefix(name, config.EnvPrefix) && !flags[name] {
				t.Errorf("deployment.yaml sets %s, which stands for no flag", name)
			}
		}
		if links := spec.EnableServiceLinks; links == nil || *links {
			t.Error("enableServiceLinks is not false: the kubelet would set MCP_RUN_PYTHON_PORT=tcp://..., which the program reads as --port")
		}
	})

	t.Run("port", func(t *testing.T) {
		if len(c.Ports) != 1 {
			t.Fatalf("container %s declares %d ports, want 1", c.Name, len(c.Ports))
		}
		p := c.Ports[0]
		if int(p.ContainerPort) != cfg.Port || p.Name == "" || (p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) {
			t.Errorf("container port %s %d/%s, want a named TCP port %d (--port)", p.Name, p.ContainerPort, p.Protocol, cfg.Port)
		}
		paths := probePaths(t)
		ann := k.deployment.Spec.Template.Annotations
		if ann["prometheus.io/port"] != "" && ann["prometheus.io/port"] != strconv.Itoa(cfg.Port) {
			t.Errorf("annotation prometheus.io/port %q, want %d", ann["prometheus.io/port"], cfg.Port)
		}
		if ann["prometheus.io/path"] != "" && ann["prometheus.io/path"] != paths["metricsPath"] {
			t.Errorf("annotation prometheus.io/path %q, want %q", ann["prometheus.io/path"], paths["metricsPath"])
		}
	})

	t.Run("probes", func(t *testing.T) {
		paths := probePaths(t)
		for _, p := range []struct {
			what  string
			probe *corev1.Probe
			path  string
		}{
			{"livenessProbe", c.LivenessProbe, paths["healthzPath"]},
			{"readinessProbe", c.ReadinessProbe, paths["readyzPath"]},
		} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: want an httpGet probe of %s", p.what, p.path)
				continue
			}
			g := p.probe.HTTPGet
			if g.Path != p.path {
				t.Errorf("%s: path %q, want %q (transport/probes.go)", p.what, g.Path, p.path)
			}
			if port := portNumber(t, c, g.Port); port != cfg.Port {
				t.Errorf("%s: port %d, want %d (--port)", p.what, port, cfg.Port)
			}
			if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
				t.Errorf("%s: scheme %s; the server speaks plain HTTP", p.what, g.Scheme)
			}
			if g.Host != "" {
				t.Errorf("%s: host %q; the kubelet should call the pod's own address", p.what, g.Host)
			}
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		var preStop time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			h := c.Lifecycle.PreStop
			if h.Sleep == nil || h.Exec != nil || h.HTTPGet != nil {
				t.Errorf("preStop: want only a sleep (the image runs no shell for it)")
			} else {
				preStop = time.Duration(h.Sleep.Seconds) * time.Second
			}
		}
		need := preStop + cfg.ShutdownTimeout + cfg.Supervisor.Grace + stopMargin
		if spec.TerminationGracePeriodSeconds == nil {
			t.Fatalf("no terminationGracePeriodSeconds: Kubernetes' 30 s, want at least %v", need)
		}
		if got := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second; got < need {
			t.Errorf("terminationGracePeriodSeconds %v, want at least %v: preStop %v + --shutdown-timeout %v + --grace %v + %v",
				got, need, preStop, cfg.ShutdownTimeout, cfg.Supervisor.Grace, stopMargin)
		}
	})

	t.Run("memory", func(t *testing.T) {
		workers := int64(cfg.Supervisor.Workers)
		if cfg.Sessions {
			workers += int64(cfg.MaxSessions) // each session holds a worker
		}
		want := resource.NewQuantity(workers*workerMemory.Value()+frontEndMemory.Value(), resource.BinarySI)
		request, ok := c.Resources.Requests[corev1.ResourceMemory]
		if !ok || request.Cmp(*want) < 0 {
			t.Errorf("memory request %s, want at least %s: %d workers x %s + %s for the front end",
				request.String(), want, workers, workerMemory.String(), frontEndMemory.String())
		}
		if cfg.Supervisor.MemoryLimit <= 0 {
			t.Fatal("--memory-limit is 0: workers could take any memory and the pod cannot be sized")
		}
		wantLimit := resource.NewQuantity(workers*cfg.Supervisor.MemoryLimit+frontEndHeadroom.Value(), resource.BinarySI)
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok || limit.Cmp(*wantLimit) < 0 {
			t.Errorf("memory limit %s, want at least %s: %d workers x --memory-limit %d + %s, so that the server stops a worker before the OOM killer does",
				limit.String(), wantLimit, workers, cfg.Supervisor.MemoryLimit, frontEndHeadroom.String())
		}
		if cpu, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok || cpu.IsZero() {
			t.Error("no CPU request: the autoscaler's utilization is relative to it")
		}
	})

	t.Run("security", func(t *testing.T) {
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Error("automountServiceAccountToken is not false: the server needs no API access")
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Error("the pod shares a namespace of the host")
		}
		uid, gid := img.user(t)
		psc := spec.SecurityContext
		if psc == nil {
			t.Fatal("no pod securityContext")
		}
		checkInt64 := func(what string, got *int64, want int64) {
			t.Helper()
			if got == nil || *got != want {
				t.Errorf("pod securityContext.%s is %v, want %d (the Dockerfile's USER)", what, optInt64(got), want)
			}
		}
		checkInt64("runAsUser", psc.RunAsUser, uid)
		checkInt64("runAsGroup", psc.RunAsGroup, gid)
		checkInt64("fsGroup", psc.FSGroup, gid)
		if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Error("pod securityContext.runAsNonRoot is not true")
		}
		if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Error("pod securityContext.seccompProfile is not RuntimeDefault")
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			checkContainerSecurity(t, c)
		}
	})

	t.Run("volumes", func(t *testing.T) {
		volumes := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v
			if v.Secret != nil && v.VolumeSource == (corev1.VolumeSource{Secret: v.Secret}) {
				checkTokenSecret(t, v, c, cfg)
				continue
			}
			if v.EmptyDir == nil || v.VolumeSource != (corev1.VolumeSource{EmptyDir: v.EmptyDir}) {
				t.Errorf("volume %s is not an emptyDir alone (or the token Secret): the pod should hold no state of its own", v.Name)
			} else if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
				t.Errorf("volume %s has no sizeLimit", v.Name)
			}
		}
		vars := serverVariables(t, k, img)
		tmp := vars["TMPDIR"]
		if tmp == "" {
			tmp = "/tmp" // os.TempDir
		}
		mountAt := func(path string) (corev1.VolumeMount, bool) {
			for _, m := range c.VolumeMounts {
				if m.MountPath == path && !m.ReadOnly && m.SubPathExpr == "" {
					return m, true
				}
			}
			return corev1.VolumeMount{}, false
		}
		within := func(path string) bool {
			for _, m := range c.VolumeMounts {
				if !m.ReadOnly && (path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")) {
					return true
				}
			}
			return false
		}
		cacheMount, _ := mountAt(cfg.Supervisor.CacheDir)
		for _, w := range []struct{ what, path string }{
			{"the cache directory (--cache-dir)", cfg.Supervisor.CacheDir},
			{"the temporary directory (TMPDIR)", tmp},
		} {
			m, ok := mountAt(w.path)
			if !ok {
				t.Errorf("no writable volume is mounted at %s, %s; the root file system is read-only", w.path, w.what)
			} else if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s mounts volume %q, which the pod does not declare", w.path, m.Name)
			}
		}
		for _, v := range []struct{ what, path string }{
			{"HOME", vars["HOME"]},
			{"the image's TMPDIR", img.env["TMPDIR"]},
			{"the image's HOME", img.env["HOME"]},
		} {
			if v.path != "" && !within(v.path) {
				t.Errorf("%s, %s, is on the read-only root file system", v.what, v.path)
			}
		}
		if cfg.Supervisor.CacheDir != img.cacheDir(t) {
			t.Errorf("the server's cache %s is not where the image was warmed up, %s: the snapshot's code cache names its files by path",
				cfg.Supervisor.CacheDir, img.cacheDir(t))
		}
		// The init container fills the server's cache mount with the
		// image's warm cache: the cache volume, at the server's subPath, in
		// a directory that cp makes itself (the volume's root belongs to
		// root, whose mode and times cp -a could not set).
		seed := k.container(t, "seed-cache", true)
		var seedMount string
		for _, m := range seed.VolumeMounts {
			if m.Name == cacheMount.Name && m.SubPath == "" && m.SubPathExpr == "" {
				seedMount = m.MountPath
			}
		}
		if seedMount == "" || seedMount == img.cacheDir(t) {
			t.Fatalf("init container %s mounts the cache volume at %q; want its root, elsewhere than the image's cache %s, which it copies", seed.Name, seedMount, img.cacheDir(t))
		}
		if cacheMount.SubPath == "" {
			t.Errorf("the server mounts the cache volume's root at %s; want a subPath that the init container's cp makes", cfg.Supervisor.CacheDir)
		}
		// -f: a second run replaces the read-only files of the first.
		want := []string{"cp", "-a", "-f", img.cacheDir(t) + "/.", path.Join(seedMount, cacheMount.SubPath)}
		if got := append(slices.Clone(seed.Command), seed.Args...); !slices.Equal(got, want) {
			t.Errorf("init container %s runs %q, want %q", seed.Name, got, want)
		}
	})
}

// optInt64 is *p, or nil.
func optInt64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkContainerSecurity checks one container's securityContext: no root,
// no privileges, no capabilities, a read-only root file system.
func checkContainerSecurity(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("container %s has no securityContext", c.Name)
		return
	}
	for _, f := range []struct {
		what string
		got  *bool
		want bool
	}{
		{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem, true},
		{"allowPrivilegeEscalation", sc.AllowPrivilegeEscalation, false},
		{"privileged", sc.Privileged, false},
		{"runAsNonRoot", sc.RunAsNonRoot, true},
	} {
		if f.got == nil {
			t.Errorf("container %s: securityContext.%s is not set, want %v", c.Name, f.what, f.want)
		} else if *f.got != f.want {
			t.Errorf("container %s: securityContext.%s is %v, want %v", c.Name, f.what, *f.got, f.want)
		}
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Errorf("container %s runs as root", c.Name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("container %s: capabilities %+v, want drop [ALL] and nothing added", c.Name, sc.Capabilities)
	}
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		t.Errorf("container %s: seccomp Unconfined", c.Name)
	}
}

// TestKubernetesService checks that the Service reaches the server's port.
func TestKubernetesService(t *testing.T) {
	k := loadKube(t)
	cfg := serverConfig(t, k, loadDockerfile(t))
	c := k.server(t)
	if k.service.Spec.Type != "" && k.service.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service type %s: keep it ClusterIP behind an authenticating gateway", k.service.Spec.Type)
	}
	if len(k.service.Spec.Ports) == 0 {
		t.Fatal("the Service has no ports")
	}
	for _, p := range k.service.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port) // Kubernetes' default
		}
		if got := portNumber(t, c, target); got != cfg.Port {
			t.Errorf("service port %s targets %d, want %d (--port)", p.Name, got, cfg.Port)
		}
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			t.Errorf("service port %s: protocol %s, want TCP", p.Name, p.Protocol)
		}
	}
}

// TestKubernetesAutoscaling checks the autoscalers and the disruption
// budget together: the budget must leave a pod to evict at the autoscaler's
// minimum, and the custom metrics must be ones the program exports.
func TestKubernetesAutoscaling(t *testing.T) {
	k := loadKube(t)
	cfg := serverConfig(t, k, loadDockerfile(t))
	names, states := supervisorMetrics(t)
	if k.pdb.Spec.MaxUnavailable != nil || k.pdb.Spec.MinAvailable == nil || k.pdb.Spec.MinAvailable.Type != intstr.Int {
		t.Fatalf("pdb.yaml: want minAvailable as a number")
	}
	minAvailable := k.pdb.Spec.MinAvailable.IntValue()
	if minAvailable < 1 {
		t.Errorf("pdb.yaml: minAvailable %d, want at least 1", minAvailable)
	}
	for file, hpa := range k.hpas {
		t.Run(file, func(t *testing.T) {
			s := hpa.Spec
			if s.MinReplicas == nil || int(*s.MinReplicas) <= minAvailable {
				t.Errorf("minReplicas %v, want above the PodDisruptionBudget's minAvailable %d, or no pod can ever be evicted", optInt32(s.MinReplicas), minAvailable)
			}
			if s.MinReplicas != nil && s.MaxReplicas < *s.MinReplicas {
				t.Errorf("maxReplicas %d below minReplicas %d", s.MaxReplicas, *s.MinReplicas)
			}
			if len(s.Metrics) == 0 {
				t.Fatal("no metrics")
			}
			for _, m := range s.Metrics {
				switch m.Type {
				case autoscalingv2.ResourceMetricSourceType:
					r := m.Resource
					if r.Name != corev1.ResourceCPU || r.Target.Type != autoscalingv2.UtilizationMetricType || r.Target.AverageUtilization == nil {
						t.Errorf("resource metric %s %s: want CPU utilization", r.Name, r.Target.Type)
					}
				case autoscalingv2.PodsMetricSourceType:
					p := m.Pods
					if !names[p.Metric.Name] {
						t.Errorf("pods metric %q: supervisor/metrics.go exports no such metric", p.Metric.Name)
					}
					var state string
					if p.Metric.Selector != nil {
						for l, v := range p.Metric.Selector.MatchLabels {
							if l != "state" || !states[v] {
								t.Errorf("pods metric %s: selector %s=%s matches no series of the program", p.Metric.Name, l, v)
							}
							state = v
						}
					}
					if p.Target.Type != autoscalingv2.AverageValueMetricType || p.Target.AverageValue == nil {
						t.Errorf("pods metric %s: want an averageValue target", p.Metric.Name)
						continue
					}
					if p.Metric.Name == "mcp_run_python_workers" && state == "busy" {
						if max := resource.NewQuantity(int64(cfg.Supervisor.Workers), resource.DecimalSI); p.Target.AverageValue.Cmp(*max) >= 0 {
							t.Errorf("busy workers target %s: a pod has at most %d (--workers), so it would never scale out", p.Target.AverageValue, cfg.Supervisor.Workers)
						}
					}
				default:
					t.Errorf("metric type %s: not checked by the tests", m.Type)
				}
			}
		})
	}
}

// optInt32 is *p, or nil.
func optInt32(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestKubernetesNetworkPolicy checks that the pods take traffic on the MCP
// port only and send none but DNS, which holds for Python code because it
// has no network (--disable-networking, checked with the Deployment).
func TestKubernetesNetworkPolicy(t *testing.T) {
	k := loadKube(t)
	cfg := serverConfig(t, k, loadDockerfile(t))
	np := k.networkPolicy.Spec
	c := k.server(t)
	for _, pt := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
		if !slices.Contains(np.PolicyTypes, pt) {
			t.Errorf("policyTypes %v lacks %s", np.PolicyTypes, pt)
		}
	}
	if len(np.Ingress) == 0 {
		t.Error("no ingress rule: nothing could reach the server")
	}
	for i, r := range np.Ingress {
		if len(r.Ports) == 0 {
			t.Errorf("ingress rule %d allows every port", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.EndPort != nil || portNumber(t, c, *p.Port) != cfg.Port || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
				t.Errorf("ingress rule %d allows port %v, want TCP %d (--port) only", i, p.Port, cfg.Port)
			}
		}
	}
	for i, r := range np.Egress {
		if len(r.Ports) == 0 {
			t.Errorf("egress rule %d allows every port", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.EndPort != nil || p.Port.IntValue() != 53 {
				t.Errorf("egress rule %d allows port %v, want DNS (53) only", i, p.Port)
			}
		}
		if len(r.To) == 0 {
			t.Errorf("egress rule %d allows DNS to anywhere; name the cluster's DNS", i)
		}
	}
}

// dockerfile is the parsed Dockerfile.
type dockerfile struct {
	metaArgs map[string]string // ARGs before the first FROM, with defaults
	stages   []instructions.Stage
	env      map[string]string // the final stage's ENV: the containers' environment
}

// loadDockerfile parses the Dockerfile as BuildKit does; a lint warning of
// the parser fails the test.
func loadDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s", w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		t.Errorf("Dockerfile: line %v: %s: %s", loc, rule, msg)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and the image", len(stages))
	}
	d := dockerfile{metaArgs: map[string]string{}, stages: stages, env: map[string]string{}}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			d.metaArgs[kv.Key] = kv.ValueString()
		}
	}
	for _, cmd := range d.final().Commands {
		if e, ok := cmd.(*instructions.EnvCommand); ok {
			for _, kv := range e.Env {
				d.env[kv.Key] = os.Expand(kv.Value, func(name string) string { return d.env[name] })
			}
		}
	}
	return d
}

// final is the stage that makes the image.
func (d dockerfile) final() instructions.Stage { return d.stages[len(d.stages)-1] }

// base is the image that stage s starts from, with the meta ARGs expanded.
func (d dockerfile) base(s instructions.Stage) string {
	return os.Expand(s.BaseName, func(name string) string { return d.metaArgs[name] })
}

// stage returns the stage named name, or fails.
func (d dockerfile) stage(t *testing.T, name string) instructions.Stage {
	t.Helper()
	for _, s := range d.stages {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("Dockerfile has no stage %q", name)
	return instructions.Stage{}
}

// copyFrom returns the final stage's COPY --from=stage of source: its
// destination, or "".
func (d dockerfile) copyFrom(stage, source string) string {
	for _, cmd := range d.final().Commands {
		if c, ok := cmd.(*instructions.CopyCommand); ok && c.From == stage && slices.Equal(c.SourcePaths, []string{source}) {
			return c.DestPath
		}
	}
	return ""
}

// user is the final stage's last USER, which must be numeric uid:gid (a
// name cannot be checked against runAsNonRoot) and not root.
func (d dockerfile) user(t *testing.T) (uid, gid int64) {
	t.Helper()
	var user string
	for _, cmd := range d.final().Commands {
		if u, ok := cmd.(*instructions.UserCommand); ok {
			user = u.User
		}
	}
	u, g, ok := strings.Cut(user, ":")
	if !ok {
		g = u
	}
	uid, errU := strconv.ParseInt(u, 10, 64)
	gid, errG := strconv.ParseInt(g, 10, 64)
	if errU != nil || errG != nil || uid == 0 || gid == 0 {
		t.Fatalf("Dockerfile: the image's USER is %q, want numeric UID:GID, not root", user)
	}
	return uid, gid
}

// programArgs returns the arguments that a shell command line passes to
// the program (named by its path or its name), up to the end of that
// command; nil when it does not run it.
func programArgs(cmdline, program string) []string {
	fields := strings.Fields(cmdline)
	for i, f := range fields {
		if f == program || f == filepath.Base(program) {
			var args []string
			for _, a := range fields[i+1:] {
				if a == "&&" || a == ";" || a == "||" || a == "|" {
					break
				}
				args = append(args, a)
			}
			return args
		}
	}
	return nil
}

// programRun is a RUN of the image's stage that runs the program.
type programRun struct {
	cfg  config.Config // what its arguments parse to
	user string        // the USER it runs as
}

// programRuns returns the RUNs of the image's stage that run the program,
// in order, with the stage's build arguments expanded (their defaults) as
// the shell does.
func (d dockerfile) programRuns(t *testing.T) []programRun {
	t.Helper()
	program := d.entrypoint(t)
	var runs []programRun
	user := ""
	buildArgs := map[string]string{}
	for _, cmd := range d.final().Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				// BuildKit removes the quotes of a default as it builds.
				v, _, err := shell.NewLex('\\').ProcessWord(kv.ValueString(), shell.EnvsFromSlice(nil))
				if err != nil {
					t.Fatalf("Dockerfile: ARG %s: %v", kv.Key, err)
				}
				buildArgs[kv.Key] = v
			}
		case *instructions.RunCommand:
			line := os.Expand(strings.Join(c.CmdLine, " "), func(name string) string { return buildArgs[name] })
			if args := programArgs(line, program); args != nil {
				runs = append(runs, programRun{cfg: parseContainer(t, "Dockerfile RUN", args, d.env), user: user})
			}
		}
	}
	return runs
}

// warmup returns what the image's warmup RUN parses to: it must run as the
// image's user, so that the server owns the cache it writes.
func (d dockerfile) warmup(t *testing.T) config.Config {
	t.Helper()
	uid, _ := d.user(t)
	for _, r := range d.programRuns(t) {
		if r.cfg.Mode != config.ModeWarmup {
			continue
		}
		if u, _, _ := strings.Cut(r.user, ":"); u != strconv.FormatInt(uid, 10) {
			t.Errorf("Dockerfile: warmup runs as user %q, not the image's %d: the server could not write its cache", r.user, uid)
		}
		return r.cfg
	}
	t.Fatalf("Dockerfile: the image's stage runs no `%s warmup`", filepath.Base(d.entrypoint(t)))
	return config.Config{}
}

// TestDockerfileFetch: by default the image carries numpy and pandas in
// the package cache the server uses, fetched as its user after warmup, so
// that a server behind a firewall installs them.
func TestDockerfileFetch(t *testing.T) {
	img := loadDockerfile(t)
	uid, _ := img.user(t)
	warm := img.warmup(t)
	var fetch *programRun
	for _, r := range img.programRuns(t) {
		if r.cfg.Mode == config.ModeFetch {
			fetch = &r
		}
	}
	switch {
	case fetch == nil:
		t.Fatal("Dockerfile: the image's stage runs no fetch")
	case !slices.Equal(fetch.cfg.Fetch, []string{"numpy", "pandas"}):
		t.Errorf("Dockerfile: fetch gets %q by default, want numpy and pandas", fetch.cfg.Fetch)
	case fetch.cfg.Supervisor.CacheDir != warm.Supervisor.CacheDir:
		t.Errorf("Dockerfile: fetch fills %s, but warmup %s", fetch.cfg.Supervisor.CacheDir, warm.Supervisor.CacheDir)
	}
	if u, _, _ := strings.Cut(fetch.user, ":"); u != strconv.FormatInt(uid, 10) {
		t.Errorf("Dockerfile: fetch runs as user %q, not the image's %d: the server could not use its files", fetch.user, uid)
	}
}

// cacheDir is the cache that warmup filled in the image.
func (d dockerfile) cacheDir(t *testing.T) string {
	t.Helper()
	return d.warmup(t).Supervisor.CacheDir
}

// entrypoint is the image's ENTRYPOINT: the program, in exec form.
func (d dockerfile) entrypoint(t *testing.T) string {
	t.Helper()
	var ep *instructions.EntrypointCommand
	for _, cmd := range d.final().Commands {
		if e, ok := cmd.(*instructions.EntrypointCommand); ok {
			ep = e
		}
	}
	if ep == nil || ep.PrependShell || len(ep.CmdLine) != 1 {
		t.Fatal("Dockerfile: want ENTRYPOINT [\"/path/to/mcp-run-python\"], in exec form so that the program gets the signals")
	}
	return ep.CmdLine[0]
}

// TestDockerfile checks the image's Dockerfile against the program, the
// Makefile, go.mod and .goreleaser.yaml.
func TestDockerfile(t *testing.T) {
	d := loadDockerfile(t)
	final := d.final()
	program := d.entrypoint(t)

	t.Run("binary", func(t *testing.T) {
		if filepath.Base(program) != "mcp-run-python" || !filepath.IsAbs(program) {
			t.Fatalf("ENTRYPOINT %q, want the absolute path of mcp-run-python", program)
		}
		// The build stage's go build, with the release's flags.
		var from, source string
		for _, cmd := range final.Commands {
			if c, ok := cmd.(*instructions.CopyCommand); ok && c.DestPath == program && len(c.SourcePaths) == 1 {
				from, source = c.From, c.SourcePaths[0]
			}
		}
		if from == "" {
			t.Fatalf("the image does not COPY --from a build stage to %s", program)
		}
		build := d.stage(t, from)
		goMod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
		if goVersion == nil {
			t.Fatal("go.mod: no go line")
		}
		if base := d.base(build); !strings.HasPrefix(base, "golang:"+string(goVersion[1])) {
			t.Errorf("build stage FROM %s, want golang:%s (go.mod)", base, goVersion[1])
		}
		release, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, cmd := range build.Commands {
			r, ok := cmd.(*instructions.RunCommand)
			if !ok || !strings.Contains(strings.Join(r.CmdLine, " "), "go build") {
				continue
			}
			found = true
			line := strings.Join(r.CmdLine, " ")
			want := []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "-o " + source, "./cmd/mcp-run-python"}
			for _, m := range regexp.MustCompile(`-X (main\.\w+)=`).FindAllStringSubmatch(string(release), -1) {
				want = append(want, "-X "+m[1]+"=")
			}
			for _, w := range want {
				if !strings.Contains(line, w) {
					t.Errorf("build stage: go build lacks %q (as .goreleaser.yaml builds): %s", w, line)
				}
			}
		}
		if !found {
			t.Errorf("build stage %s runs no go build", from)
		}
	})

	t.Run("deno", func(t *testing.T) {
		makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^DENO_VERSION\s*:?=\s*(\S+)`).FindSubmatch(makefile)
		if m == nil {
			t.Fatal("Makefile: no DENO_VERSION")
		}
		want := "denoland/deno:bin-" + string(m[1])
		var stage string
		for _, s := range d.stages {
			if d.base(s) == want {
				stage = s.Name
			}
		}
		if stage == "" {
			t.Fatalf("no stage FROM %s (the Makefile's DENO_VERSION)", want)
		}
		dest := d.copyFrom(stage, "/deno")
		if dest == "" {
			t.Fatalf("the image does not COPY --from=%s /deno", stage)
		}
		// The image's environment names it: no PATH lookup to depend on.
		if cfg := d.warmup(t); cfg.Supervisor.Deno != dest {
			t.Errorf("the program runs deno %q, but the image has it at %s", cfg.Supervisor.Deno, dest)
		}
	})

	t.Run("warmup", func(t *testing.T) {
		cfg := d.warmup(t)
		if !strings.HasPrefix(cfg.Supervisor.CacheDir, "/") || strings.HasPrefix(cfg.Supervisor.CacheDir, "/tmp") {
			t.Errorf("warmup fills %s; want a fixed path of the image, not the temporary directory", cfg.Supervisor.CacheDir)
		}
		flags := flagVariables()
		for name := range d.env {
			if strings.HasPrefix(name, config.EnvPrefix) && !flags[name] {
				t.Errorf("ENV %s stands for no flag", name)
			}
		}
	})

	t.Run("serve", func(t *testing.T) {
		var cmd *instructions.CmdCommand
		var exposed []string
		for _, c := range final.Commands {
			switch c := c.(type) {
			case *instructions.CmdCommand:
				cmd = c
			case *instructions.ExposeCommand:
				exposed = append(exposed, c.Ports...)
			}
		}
		if cmd == nil || cmd.PrependShell {
			t.Fatal("want a CMD in exec form: the default arguments of the ENTRYPOINT")
		}
		// In a pod that takes the Service's link variables, as by default.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: appName}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 3001}}}}
		for what, vars := range map[string]map[string]string{
			"docker run":       d.env,
			"a pod with links": mergeVars(serviceLinkVariables(svc), d.env),
		} {
			cfg := parseContainer(t, "Dockerfile CMD ("+what+")", cmd.CmdLine, vars)
			if !isHTTPMode(cfg.Mode) || cfg.Host != "0.0.0.0" {
				t.Errorf("%s: CMD serves %s on %s, want an HTTP mode on 0.0.0.0", what, cfg.Mode, cfg.Host)
			}
			if want := []string{strconv.Itoa(cfg.Port), strconv.Itoa(cfg.Port) + "/tcp"}; len(exposed) != 1 || !slices.Contains(want, exposed[0]) {
				t.Errorf("%s: EXPOSE %q, want the CMD's port %d", what, exposed, cfg.Port)
			}
			if cfg.Supervisor.CacheDir != d.cacheDir(t) {
				t.Errorf("%s: CMD serves from cache %s, warmup filled %s", what, cfg.Supervisor.CacheDir, d.cacheDir(t))
			}
		}
	})
}

// checkTokenSecret checks the Secret volume v of container c: mounted
// read-only where --auth-token-file points, with a mode the server accepts
// (no access for others, no writing for the group).
func checkTokenSecret(t *testing.T, v corev1.Volume, c corev1.Container, cfg config.Config) {
	t.Helper()
	if cfg.Auth.TokenFile == "" {
		t.Errorf("Secret volume %s, but no --auth-token-file", v.Name)
		return
	}
	if m := v.Secret.DefaultMode; m == nil || *m&0o027 != 0 {
		t.Errorf("Secret volume %s: defaultMode %v lets others read or the group write; the server refuses such a token file", v.Name, m)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == v.Name {
			if !m.ReadOnly || !strings.HasPrefix(cfg.Auth.TokenFile, strings.TrimSuffix(m.MountPath, "/")+"/") {
				t.Errorf("Secret volume %s is mounted at %s (read-only %v); --auth-token-file is %s", v.Name, m.MountPath, m.ReadOnly, cfg.Auth.TokenFile)
			}
			return
		}
	}
	t.Errorf("Secret volume %s is not mounted", v.Name)
}
