package atoms

import (
	"math"
	"math/rand/v2"
)

// Rotation is a 3×3 rotation matrix, row-major: v' = R v.
type Rotation [9]float64

// RandomRotation draws a rotation uniformly from SO(3): the unit
// quaternion of four standard normal draws (Shoemake's method; the
// normalised Gaussian 4-vector is uniform on the sphere, its rotation
// uniform in SO(3)).
func RandomRotation(r *rand.Rand) Rotation {
	var q [4]float64
	var n2 float64
	for n2 < 1e-20 {
		n2 = 0
		for i := range q {
			q[i] = r.NormFloat64()
			n2 += q[i] * q[i]
		}
	}
	n := math.Sqrt(n2)
	a, b, c, d := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return Rotation{
		1 - 2*(c*c+d*d), 2 * (b*c - a*d), 2 * (b*d + a*c),
		2 * (b*c + a*d), 1 - 2*(b*b+d*d), 2 * (c*d - a*b),
		2 * (b*d - a*c), 2 * (c*d + a*b), 1 - 2*(b*b+c*c),
	}
}

// Vectors appends R v for every 3-vector of vs to dst.
func (R *Rotation) Vectors(dst, vs []float64) []float64 {
	for k := 0; k+2 < len(vs); k += 3 {
		x, y, z := vs[k], vs[k+1], vs[k+2]
		dst = append(dst,
			R[0]*x+R[1]*y+R[2]*z,
			R[3]*x+R[4]*y+R[5]*z,
			R[6]*x+R[7]*y+R[8]*z)
	}
	return dst
}

// Tensor appends R M Rᵀ of the row-major 3×3 matrix m to dst (a stress,
// virials).
func (R *Rotation) Tensor(dst, m []float64) []float64 {
	var t [9]float64 // R M
	for i := range 3 {
		for j := range 3 {
			t[3*i+j] = R[3*i]*m[j] + R[3*i+1]*m[3+j] + R[3*i+2]*m[6+j]
		}
	}
	for i := range 3 {
		for j := range 3 {
			dst = append(dst, t[3*i]*R[3*j]+t[3*i+1]*R[3*j+1]+t[3*i+2]*R[3*j+2])
		}
	}
	return dst
}

// Equivariant says how a property turns under a rotation: a vector per
// atom or per structure (forces, dipole), a 3×3 tensor (stress, virials),
// or not at all.
func Equivariant(name string, size int) (vector, tensor bool) {
	switch name {
	case "forces", "dipole":
		return size == 3, false
	case "stress", "virials":
		return false, size == 9
	}
	return false, false
}
