// Package must turns the error of a constructor a test cannot do without
// into a failure of that test. Library code never panics on a bad
// configuration: every constructor of idem returns (T, error), and a test
// that gives valid options takes the value with Get:
//
//	layer := must.Get(memlayer.New())(t)
//
// Get fails the test with FailNow, so it must be called on the test's own
// goroutine, like t.Fatal.
package must
