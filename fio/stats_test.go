package fio

import (
	"math"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestRegIncBeta(t *testing.T) {
	cases := []struct {
		name    string
		a, b, x float64
		want    float64
	}{
		{"I_x(a,1) = x^a", 2.5, 1, 0.3, math.Pow(0.3, 2.5)},
		{"I_x(1,b) = 1-(1-x)^b", 1, 3.2, 0.4, 1 - math.Pow(0.6, 3.2)},
		{"I_0.5(a,a) = 1/2", 7.3, 7.3, 0.5, 0.5},
		{"I_x(1,1) = x", 1, 1, 0.77, 0.77},
		{"x=0", 2, 3, 0, 0},
		{"x=1", 2, 3, 1, 1},
		{"large side, symmetry", 2, 30, 0.2, 1 - RegIncBeta(30, 2, 0.8)},
		// Where only the right side of the symmetry converges (mpmath betainc).
		{"a=b=1000 below the middle", 1000, 1000, 0.45, 3.683198869007578e-06},
		{"a=5000 b=0.5 near 1", 5000, 0.5, 0.99, 1.1849636488949231e-23},
	}
	for _, c := range cases {
		if got := RegIncBeta(c.a, c.b, c.x); !near(got, c.want, 1e-12*max(1, c.want)) || c.want < 1e-3 && !near(got, c.want, 1e-9*c.want) {
			t.Errorf("%s: I_%g(%g,%g) = %.15g, want %.15g", c.name, c.x, c.a, c.b, got, c.want)
		}
	}
}

func TestStudentTCDF(t *testing.T) {
	cases := []struct {
		name  string
		t, df float64
		want  float64
		tol   float64
	}{
		// Closed forms.
		{"df=1 is Cauchy", 1.7, 1, 0.5 + math.Atan(1.7)/math.Pi, 1e-12},
		{"df=1 negative", -3, 1, 0.5 + math.Atan(-3)/math.Pi, 1e-12},
		{"df=2 closed form", 0.8, 2, 0.5 + 0.8/(2*math.Sqrt(2+0.64)), 1e-12},
		{"t=0", 0, 7, 0.5, 1e-15},
		// Printed tables: the 97.5% and 99.5% quantiles.
		{"t(10) 97.5%", 2.228139, 10, 0.975, 1e-7},
		{"t(5) 97.5%", 2.570582, 5, 0.975, 1e-7},
		{"t(30) 97.5%", 2.042272, 30, 0.975, 1e-7},
		{"t(10) 99.5%", 3.169273, 10, 0.995, 1e-7},
		{"t(2) 97.5%", 4.302653, 2, 0.975, 1e-7},
		// Huge df tends to the normal distribution.
		{"normal limit", 1.959964, 1e9, 0.975, 1e-6},
		// Fractional df (Welch's), against Simpson integration of the t density
		// in Python (200,000 intervals), an independent computation.
		{"t=2 df=10", 2.0, 10, 0.9633059826146273, 1e-9},
		{"t=-1.5 df=3.7", -1.5, 3.7, 0.10679908460101001, 1e-9},
		{"t=0.3 df=2.5", 0.3, 2.5, 0.606328814252404, 1e-9},
		{"t=5 df=4.2", 5.0, 4.2, 0.9967064670347845, 1e-9},
	}
	for _, c := range cases {
		if got := StudentTCDF(c.t, c.df); !near(got, c.want, c.tol) {
			t.Errorf("%s: P(T<=%g | df=%g) = %.12f, want %.12f", c.name, c.t, c.df, got, c.want)
		}
	}
}

func TestWelchP(t *testing.T) {
	cases := []struct {
		name string
		a, b []float64
		want float64
		ok   bool
	}{
		// References: Welch's t and df by hand, p by the Python integration above.
		{"sw1m-like", []float64{1807, 1892, 2063}, []float64{1654, 1528, 1557}, 0.02792767153235154, true},
		{"4 vs 3", []float64{10, 11, 12, 13}, []float64{14, 15, 17}, 0.025144312941172475, true},
		{"Lab 37 default reads vs 3 of native/threads", []float64{26867, 29085, 26063, 27460, 27121}, []float64{32438, 33112, 31479}, 0.0004950094032052377, true},
		{"two runs is not enough", []float64{27460, 27121}, []float64{32438, 33112, 31479}, 0, false},
		{"identical runs, same mean", []float64{5, 5, 5}, []float64{5, 5, 5}, 1, true},
		{"identical runs, other mean", []float64{5, 5, 5}, []float64{6, 6, 6}, 0, true},
		// Equal spreads, means apart (mpmath: t = -3.674, df = 4, p by quadrature).
		{"same variance both sides", []float64{1, 2, 3}, []float64{4, 5, 6}, 0.021311641128756724, true},
		{"one side 2 runs", []float64{1, 2, 3}, []float64{4, 5}, 0, false},
	}
	for _, c := range cases {
		p, ok := WelchP(NewStat(c.a), NewStat(c.b))
		if ok != c.ok || !near(p, c.want, 1e-8) {
			t.Errorf("%s: p = %.12g, %v; want %.12g, %v", c.name, p, ok, c.want, c.ok)
		}
	}
}

func TestNewStat(t *testing.T) {
	// Lab 37, aio=io_uring random reads: 27,460 and 27,121 IOPS.
	s := NewStat([]float64{27460, 27121})
	if s.N != 2 || s.Mean != 27290.5 || s.Min != 27121 || s.Max != 27460 || s.Range() != 339 {
		t.Errorf("%+v", s)
	}
	if !near(s.SpreadPct, 339/27290.5*100, 1e-9) || s.CVPct != nil || !near(s.StdDev, 339/math.Sqrt2, 1e-9) {
		t.Errorf("spread %v cv %v: want 1.24%% and no CV with 2 runs", s.SpreadPct, s.CVPct)
	}
	s = NewStat([]float64{10, 12, 14})
	if s.StdDev != 2 || s.CVPct == nil || !near(*s.CVPct, 2.0/12*100, 1e-12) || !near(s.SpreadPct, 4.0/12*100, 1e-12) {
		t.Errorf("%+v", s)
	}
	if s := NewStat([]float64{7}); s.SpreadPct != 0 || s.StdDev != 0 || s.CVPct != nil || s.Mean != 7 || s.Range() != 0 {
		t.Errorf("one run: %+v", s)
	}
	if s := NewStat(nil); s.N != 0 || s.Mean != 0 || s.Values != nil {
		t.Errorf("no run: %+v", s)
	}
	// A mean of 0: no spread or CV in % of it.
	if s := NewStat([]float64{-1, 0, 1}); s.SpreadPct != 0 || s.CVPct != nil || s.StdDev != 1 {
		t.Errorf("mean 0: %+v", s)
	}
}
