package container

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a size as docker run's flags take it: 512, 64k, 64m,
// 1.5g, 2gb, 1GiB (powers of 1024, the b and i optional); "" is 0.
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num := strings.ToLower(strings.TrimSpace(s))
	num = strings.TrimSuffix(num, "b")
	num = strings.TrimSuffix(num, "i")
	mult := float64(1)
	if n := len(num); n > 0 {
		switch num[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			num = strings.TrimSpace(num[:n-1])
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || strings.Trim(num, "0123456789.") != "" || f <= 0 || f*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want a number with an optional k, m, g or t, as 512m or 2g", s)
	}
	return int64(f * mult), nil
}
