package render

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJSNumber pins jsNumber on the edges of JavaScript's number formatting.
// Each want is what JavaScript printed for its literal, with deno 2.9.6:
//
//	deno eval 'console.log(JSON.stringify(LITERALS.map((s) => JSON.stringify(Number(s)))))'
//
// For a JSON literal Number(s) is the double JSON.parse(s) gives, so want is
// JSON.stringify(JSON.parse(s)), what upstream's JSON mode wrote. NaN and
// Infinity are not JSON: ParseFloat reads them, and JavaScript prints null.
func TestJSNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		// Zeros: -0 prints as 0.
		{"0", "0"},
		{"-0", "0"},
		{"0.0", "0"},
		{"-0.0", "0"},
		{"0e10", "0"},
		{"-0e-10", "0"},
		// Plain numbers, other spellings of them, shortest round-trip digits.
		{"1", "1"},
		{"1.0", "1"},
		{"-2.50", "-2.5"},
		{"100", "100"},
		{"1E+2", "100"},
		{"0.1e1", "1"},
		{"0.1", "0.1"},
		{"0.3", "0.3"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"3.14159", "3.14159"},
		{"-3.14159", "-3.14159"},
		{"4.35", "4.35"},
		{"1.0000000000000002", "1.0000000000000002"},
		{"123e-20", "1.23e-18"},
		// Integers up to 2^53, which JavaScript holds exactly.
		{"9007199254740991", "9007199254740991"},
		{"9007199254740992", "9007199254740992"},
		{"-9007199254740992", "-9007199254740992"},
		// Numbers with a fraction or an exponent past 2^53: precision is lost,
		// digits padded with zeros.
		{"9007199254740993.0", "9007199254740992"},
		{"9007199254740993e0", "9007199254740992"},
		{"-9007199254740993.0", "-9007199254740992"},
		{"1.2345678901234567890e19", "12345678901234567000"},
		// Exponent form from 1e21 up.
		{"1e20", "100000000000000000000"},
		{"100000000000000000000", "100000000000000000000"},
		{"999999999999999900000", "999999999999999900000"},
		{"999999999999999934464.0", "1e+21"},
		{"1e21", "1e+21"},
		{"-1e21", "-1e+21"},
		{"123456789012345678901234.5", "1.2345678901234569e+23"},
		{"1e100", "1e+100"},
		{"1.5e300", "1.5e+300"},
		// Exponent form below 1e-6.
		{"1e-5", "0.00001"},
		{"0.000001", "0.000001"},
		{"1e-6", "0.000001"},
		{"0.1e-5", "0.000001"},
		{"-0.000001", "-0.000001"},
		{"0.00000123", "0.00000123"},
		{"1.2345e-6", "0.0000012345"},
		{"9.99999e-7", "9.99999e-7"},
		{"0.0000001", "1e-7"},
		{"1e-7", "1e-7"},
		{"-1e-7", "-1e-7"},
		{"1.5e-7", "1.5e-7"},
		{"1e-100", "1e-100"},
		// Subnormals and underflow.
		{"5e-324", "5e-324"},
		{"-5e-324", "-5e-324"},
		{"3e-324", "5e-324"},
		{"2e-324", "0"},
		{"1e-400", "0"},
		{"-1e-400", "0"},
		{"2.2250738585072014e-308", "2.2250738585072014e-308"},
		{"2.225073858507201e-308", "2.225073858507201e-308"},
		// The largest double, and overflow to infinity, which prints as null.
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"1.7976931348623158e308", "1.7976931348623157e+308"},
		{"1.7976931348623159e308", "null"},
		{"1e308", "1e+308"},
		{"1e309", "null"},
		{"1e400", "null"},
		{"-1e400", "null"},
		{"NaN", "null"},
		{"Infinity", "null"},
		{"-Infinity", "null"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := jsNumber(json.Number(tt.in))
			if err != nil {
				t.Fatalf("jsNumber(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("jsNumber(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestJSNumberKeepsIntegers: an integer literal, which only a Python int
// becomes, keeps all its digits, where JavaScript would round it to a double
// (its want is in the comment) and make one past the largest double null.
func TestJSNumberKeepsIntegers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"9007199254740993", "9007199254740993"},   // 9007199254740992
		{"-9007199254740993", "-9007199254740993"}, // -9007199254740992
		{"18446744073709551615", "18446744073709551615"},
		{"12345678901234567890", "12345678901234567890"},                 // 12345678901234567000
		{"999999999999999934464", "999999999999999934464"},               // 1e+21
		{"123456789012345678901234", "123456789012345678901234"},         // 1.2345678901234569e+23
		{"1" + strings.Repeat("0", 400), "1" + strings.Repeat("0", 400)}, // null
		{"-" + strings.Repeat("9", 400), "-" + strings.Repeat("9", 400)}, // null
		{"-0", "0"},
	}
	for _, tt := range tests {
		got, err := jsNumber(json.Number(tt.in))
		if err != nil {
			t.Fatalf("jsNumber(%.30s): %v", tt.in, err)
		}
		if got != tt.want {
			t.Errorf("jsNumber(%.30s) = %.30s, want %.30s", tt.in, got, tt.want)
		}
	}
}

// TestJSNumberRejectsNonNumbers checks that text that is no number is an
// error, not a guess.
func TestJSNumberRejectsNonNumbers(t *testing.T) {
	for _, in := range []string{"", "x", "1x", "--1"} {
		if got, err := jsNumber(json.Number(in)); err == nil {
			t.Errorf("jsNumber(%q) = %s, want an error", in, got)
		}
	}
}
