package worker

import (
	"os"
	"strconv"
)

var dbgCapDiv, _ = strconv.Atoi(os.Getenv("STINT_CAPDIV"))
