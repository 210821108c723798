// Command hello greets whoever it is told to, or cikit.
package main

import (
	"flag"
	"fmt"
)

// Greeting returns the greeting for name.
func Greeting(name string) string {
	if name == "" {
		name = "cikit"
	}
	return fmt.Sprintf("Hello, %s!", name)
}

func main() {
	name := flag.String("name", "", "who to greet")
	flag.Parse()
	fmt.Println(Greeting(*name))
}
