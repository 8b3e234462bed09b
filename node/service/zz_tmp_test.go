package service
import ("testing";"gopkg.in/yaml.v3")
func TestX(t *testing.T){
 for _, s := range []string{"version: 1\nservices: [a\n","version: 1\nservices:\n  a: {kind: echo\n  b: x\n","version: 1\nservices:\n  a: b\n   c: d\n", "version: 1\n\tservices: x\n", "a: 1\na: 2\n", "version: 1\nservices:\n  x: \"abc\n"} {
  var n yaml.Node
  err := yaml.Unmarshal([]byte(s), &n)
  t.Logf("%q -> %v", s, err)
 }
}
