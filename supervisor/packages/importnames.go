package packages

// knownImports maps well-known import names that differ from the name of
// the project that provides them to that project, so that `import yaml`
// installs PyYAML and not a project called "yaml".
//
// Source: the mapping file of pipreqs (github.com/bndr/pipreqs,
// pipreqs/mapping, "import:project" lines), whose entries for widely used
// projects are followed here, cut down to names whose project on PyPI is
// the maintained one (pipreqs also lists long-dead forks) and spelled as
// the projects publish them. Pyodide's lock file wins over this table for
// its built-ins ([Lock.ImportTable]), as micropip's and Pyodide's own
// import loader use only the lock's "imports" lists.
//
// Keys are import names as find_imports reports them (a dotted name for a
// namespace package, e.g. "google.protobuf").
var knownImports = map[string]string{
	"attr":               "attrs",
	"bs4":                "beautifulsoup4",
	"Crypto":             "pycryptodome",
	"Cryptodome":         "pycryptodomex",
	"cv2":                "opencv-python",
	"dateutil":           "python-dateutil",
	"discord":            "discord.py",
	"docx":               "python-docx",
	"dotenv":             "python-dotenv",
	"fitz":               "PyMuPDF",
	"git":                "GitPython",
	"github":             "PyGithub",
	"google.protobuf":    "protobuf",
	"grpc":               "grpcio",
	"jose":               "python-jose",
	"jwt":                "PyJWT",
	"ldap":               "python-ldap",
	"magic":              "python-magic",
	"markdown_it":        "markdown-it-py",
	"MySQLdb":            "mysqlclient",
	"nacl":               "PyNaCl",
	"OpenSSL":            "pyOpenSSL",
	"PIL":                "Pillow",
	"pptx":               "python-pptx",
	"psycopg2":           "psycopg2-binary",
	"pythonjsonlogger":   "python-json-logger",
	"serial":             "pyserial",
	"skimage":            "scikit-image",
	"sklearn":            "scikit-learn",
	"slugify":            "python-slugify",
	"socks":              "PySocks",
	"telegram":           "python-telegram-bot",
	"usb":                "pyusb",
	"win32api":           "pywin32",
	"yaml":               "PyYAML",
	"zmq":                "pyzmq",
	"Levenshtein":        "python-Levenshtein",
	"multipart":          "python-multipart",
	"dns":                "dnspython",
	"engineio":           "python-engineio",
	"socketio":           "python-socketio",
	"mpl_toolkits":       "matplotlib",
	"pkg_resources":      "setuptools",
	"google.genai":       "google-genai",
	"googleapiclient":    "google-api-python-client",
	"Bio":                "biopython",
	"speech_recognition": "SpeechRecognition",
	"umap":               "umap-learn",
	"xdist":              "pytest-xdist",
}

// KnownImport returns the project that provides import name imp when it is
// one of the well-known names that differ from their project.
func KnownImport(imp string) (string, bool) {
	p, ok := knownImports[imp]
	return p, ok
}
