/* sgemm.c: times OpenBLAS cblas_sgemm on the shapes of nn/kernel's
 * benchmarks, with the same row-major layouts as the Go entry points:
 *   NT: C(m,n)  = A(m,k) * B(n,k)^T
 *   NN: C(m,n)  = A(m,k) * B(k,n)
 *   TN: C(m,n) += A(k,m)^T * B(k,n)
 * and, for one row, cblas_sgemv, what a BLAS user calls for a vector:
 *   GEMV: c(n) = B(n,k) * a(k), m must be 1
 * Prints one line per op and shape: "op m k n GFLOPS cpu-GFLOPS", the rate
 * over wall time and over process CPU time, each the best of several timed
 * batches. Run with OPENBLAS_NUM_THREADS=1 for the serial figure.
 * Used only by run.sh; the Go build never links OpenBLAS. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

/* CPU time of the process: on a shared machine it counts only the time we
 * ran, as the Go benchmark's cpu-GFLOPS does. */
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static float *randmat(size_t n) {
	float *p = malloc(n * sizeof *p);
	if (!p) {
		fprintf(stderr, "sgemm: out of memory for %zu floats\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float)rand() / RAND_MAX - 0.5f;
	return p;
}

static void gemm(const char *op, int m, int k, int n, const float *a, const float *b, float *c) {
	if (!strcmp(op, "NT"))
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
	else if (!strcmp(op, "GEMV"))
		cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, b, k, a, 1, 0.0f, c, 1);
	else if (!strcmp(op, "NN"))
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
	else
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a, m, b, n, 1.0f, c, n);
}

int main(int argc, char **argv) {
	/* usage: sgemm seconds op m k n [op m k n ...] */
	if (argc < 6 || (argc - 2) % 4 != 0) {
		fprintf(stderr, "usage: %s seconds op m k n [op m k n ...]\n", argv[0]);
		return 2;
	}
	double budget = atof(argv[1]);
	for (int i = 2; i + 3 < argc; i += 4) {
		const char *op = argv[i];
		int m = atoi(argv[i + 1]), k = atoi(argv[i + 2]), n = atoi(argv[i + 3]);
		if (m <= 0 || k <= 0 || n <= 0 || (strcmp(op, "NT") && strcmp(op, "NN") && strcmp(op, "TN") && strcmp(op, "GEMV")) ||
		    (!strcmp(op, "GEMV") && m != 1)) {
			fprintf(stderr, "sgemm: bad shape %s %s %s %s\n", op, argv[i + 1], argv[i + 2], argv[i + 3]);
			return 2;
		}
		float *a = randmat((size_t)m * k), *b = randmat((size_t)k * n), *c = randmat((size_t)m * n);
		double flops = 2.0 * m * k * n, best = 0, bestcpu = 0;
		gemm(op, m, k, n, a, b, c); /* warm up */
		/* Batches of about 20 ms, the best kept; run.sh keeps the best of
		 * several go test runs in the same way. */
		int reps = 1;
		double t0 = now(), end = t0 + budget;
		do {
			double s = now(), sc = cpu();
			for (int r = 0; r < reps; r++)
				gemm(op, m, k, n, a, b, c);
			double dt = now() - s, dtc = cpu() - sc;
			double rate = flops * reps / dt / 1e9;
			if (rate > best)
				best = rate;
			if (dtc > 0 && flops * reps / dtc / 1e9 > bestcpu)
				bestcpu = flops * reps / dtc / 1e9;
			if (dt < 0.02)
				reps *= 2;
		} while (now() < end);
		printf("%s %d %d %d %.2f %.2f\n", op, m, k, n, best, bestcpu);
		free(a);
		free(b);
		free(c);
	}
	return 0;
}
