package fio

import "math"

// Stat is one metric over the runs of a group.
type Stat struct {
	N    int     `json:"runs"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	// SpreadPct is Lab 19's "(±3%)": the gap between the slowest and the
	// fastest run, in % of the mean. 0 with one run.
	SpreadPct float64 `json:"spread_pct"`
	// StdDev is the sample standard deviation (n-1), 0 with one run.
	StdDev float64 `json:"stddev"`
	// CVPct is the coefficient of variation (StdDev/Mean in %), only with 3 or more runs.
	CVPct  *float64  `json:"cv_pct,omitempty"`
	Values []float64 `json:"values"` // one per run, in file order
}

// Range is Max-Min, the spread in the metric's own unit.
func (s Stat) Range() float64 { return s.Max - s.Min }

// NewStat computes a Stat over values (one per run).
func NewStat(values []float64) Stat {
	s := Stat{N: len(values), Values: values}
	if s.N == 0 {
		return s
	}
	s.Min, s.Max = values[0], values[0]
	sum := 0.0
	for _, v := range values {
		sum += v
		s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	}
	s.Mean = sum / float64(s.N)
	if s.Mean != 0 {
		s.SpreadPct = (s.Max - s.Min) / math.Abs(s.Mean) * 100
	}
	if s.N >= 2 {
		ss := 0.0
		for _, v := range values {
			ss += (v - s.Mean) * (v - s.Mean)
		}
		s.StdDev = math.Sqrt(ss / float64(s.N-1))
	}
	if s.N >= 3 && s.Mean != 0 {
		cv := s.StdDev / math.Abs(s.Mean) * 100
		s.CVPct = &cv
	}
	return s
}

// WelchP is the two-sided p-value of Welch's t-test (unequal variances) for
// the means of a and b. ok is false with fewer than 3 runs on either side.
func WelchP(a, b Stat) (p float64, ok bool) {
	if a.N < 3 || b.N < 3 {
		return 0, false
	}
	va, vb := a.StdDev*a.StdDev/float64(a.N), b.StdDev*b.StdDev/float64(b.N)
	if va+vb == 0 { // identical runs on both sides
		if a.Mean == b.Mean {
			return 1, true
		}
		return 0, true
	}
	t := (a.Mean - b.Mean) / math.Sqrt(va+vb)
	df := (va + vb) * (va + vb) / (va*va/float64(a.N-1) + vb*vb/float64(b.N-1))
	return 2 * StudentTCDF(-math.Abs(t), df), true
}

// StudentTCDF is P(T <= t) for Student's t distribution with df degrees of
// freedom (df > 0, not necessarily whole, as Welch's df is).
func StudentTCDF(t, df float64) float64 {
	// P(|T| > |t|) = I_x(df/2, 1/2) with x = df/(df+t²).
	tail := RegIncBeta(df/2, 0.5, df/(df+t*t)) / 2
	if t > 0 {
		return 1 - tail
	}
	return tail
}

// RegIncBeta is the regularized incomplete beta function I_x(a, b), a, b > 0,
// 0 <= x <= 1, evaluated with its continued fraction (modified Lentz).
func RegIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	// The fraction converges fast for x < (a+1)/(a+b+2); use the symmetry
	// I_x(a,b) = 1 - I_{1-x}(b,a) on the other side.
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		for _, num := range [2]float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),            // even step
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)), // odd step
		} {
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < eps {
			break
		}
	}
	return h
}
