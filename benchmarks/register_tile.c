// The rate a broadcast register tile reaches on this CPU with its data in cache: a ceiling for
// the contraction rule's micro-kernels (compiler/schedules/rules/contraction.py), apart from
// everything around the tile. R rows x V vectors of 8 floats (AVX2), a reduction of K; the weights
// strip is K x 8V floats (K=768, V=2: 48 KB, past a 32 KB L1). Thread CPU time, best of 5.
//
//   for rv in "6 2" "5 2" "4 2" "4 3" "3 3" "7 1"; do set -- $rv
//     gcc -O3 -mavx2 -mfma -funroll-loops -DR=$1 -DV=$2 -DK=768 -o /tmp/tile benchmarks/register_tile.c && /tmp/tile
//   done
//
// Figures: docs/journal/schedules.md, "2026-12-07 — InceptionV3's kernels against the tile's ceiling".
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#ifndef R
#define R 6
#endif
#ifndef V
#define V 2
#endif
#ifndef K
#define K 256
#endif
static float in[R][K] __attribute__((aligned(64)));
static float w[K][V*8] __attribute__((aligned(64)));
static float out[R][V*8] __attribute__((aligned(64)));
__attribute__((noinline)) void tile(void){
  __m256 acc[R][V];
  for(int r=0;r<R;r++) for(int v=0;v<V;v++) acc[r][v]=_mm256_setzero_ps();
  for(int k=0;k<K;k++){
    __m256 wv[V];
    for(int v=0;v<V;v++) wv[v]=_mm256_load_ps(&w[k][v*8]);
    for(int r=0;r<R;r++){ __m256 b=_mm256_broadcast_ss(&in[r][k]);
      for(int v=0;v<V;v++) acc[r][v]=_mm256_fmadd_ps(b,wv[v],acc[r][v]); }
  }
  for(int r=0;r<R;r++) for(int v=0;v<V;v++) _mm256_store_ps(&out[r][v*8],acc[r][v]);
}
int main(){
  for(int r=0;r<R;r++) for(int k=0;k<K;k++) in[r][k]=1e-3f*k;
  for(int k=0;k<K;k++) for(int v=0;v<V*8;v++) w[k][v]=1e-3f;
  long n=200000; struct timespec t0,t1; double best=1e9;
  for(int rep=0;rep<5;rep++){
    clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t0);
    for(long i=0;i<n;i++) tile();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t1);
    double s=(t1.tv_sec-t0.tv_sec)+(t1.tv_nsec-t0.tv_nsec)*1e-9; if(s<best) best=s; }
  printf("R=%d V=%d: %.1f GFLOP/s (%g)\n", R, V, n*(double)R*V*8*2*K/best/1e9, out[0][0]);
}
