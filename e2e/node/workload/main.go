// A peer Job's work in the real-node tests: it says which user it ran as, then
// exits with the code EXIT_CODE asks for. Static, so its image needs no base.
package main

import (
	"fmt"
	"os"
	"strconv"
)

func main() {
	fmt.Printf("job ran as uid %d\n", os.Getuid())
	code, _ := strconv.Atoi(os.Getenv("EXIT_CODE"))
	os.Exit(code)
}
