#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
#define NB 16
/* weights: NB steps of 64 bytes f16 (32 rows); x: NB*5 floats */
__attribute__((noinline)) void loopA(const uint16_t *w, const float *x, __m512 *out, long reps){
  __m512 a[10]; for(int i=0;i<10;i++) a[i]=_mm512_setzero_ps();
  for(long r=0;r<reps;r++){ const uint16_t *wp=w; const float *xp=x;
    for(int b=0;b<NB;b++){ __m512 w0=_mm512_cvtph_ps(_mm256_loadu_si256((const void*)wp)), w1=_mm512_cvtph_ps(_mm256_loadu_si256((const void*)(wp+16)));
      _Pragma("GCC unroll 5") for(int t=0;t<5;t++){ __m512 xv=_mm512_set1_ps(xp[t]); a[t]=_mm512_fmadd_ps(w0,xv,a[t]); a[5+t]=_mm512_fmadd_ps(w1,xv,a[5+t]); }
      wp+=32; xp+=5; } }
  for(int i=0;i<10;i++) out[i]=a[i];
}
__attribute__((noinline)) void loopF(const float *w, const float *x, __m512 *out, long reps){
  __m512 a[10]; for(int i=0;i<10;i++) a[i]=_mm512_setzero_ps();
  for(long r=0;r<reps;r++){ const float *wp=w; const float *xp=x;
    for(int b=0;b<NB;b++){ __m512 w0=_mm512_loadu_ps(wp), w1=_mm512_loadu_ps(wp+16);
      _Pragma("GCC unroll 5") for(int t=0;t<5;t++){ __m512 xv=_mm512_set1_ps(xp[t]); a[t]=_mm512_fmadd_ps(w0,xv,a[t]); a[5+t]=_mm512_fmadd_ps(w1,xv,a[5+t]); }
      wp+=32; xp+=5; } }
  for(int i=0;i<10;i++) out[i]=a[i];
}
/* register-only: 10 chains, no loads */
__attribute__((noinline)) void loopR(__m512 w0, __m512 w1, __m512 *out, long reps){
  __m512 a[10]; for(int i=0;i<10;i++) a[i]=_mm512_setzero_ps(); __m512 xv[5]; for(int t=0;t<5;t++) xv[t]=_mm512_set1_ps(0.001f*t);
  for(long r=0;r<reps*NB;r++){ _Pragma("GCC unroll 5") for(int t=0;t<5;t++){ a[t]=_mm512_fmadd_ps(w0,xv[t],a[t]); a[5+t]=_mm512_fmadd_ps(w1,xv[t],a[5+t]); } __asm__ volatile("" : "+v"(w0)); }
  for(int i=0;i<10;i++) out[i]=a[i];
}
/* 5 broadcasts + 10 FMAs, weights in registers */
__attribute__((noinline)) void loopB(__m512 w0, __m512 w1, const float *x, __m512 *out, long reps){
  __m512 a[10]; for(int i=0;i<10;i++) a[i]=_mm512_setzero_ps();
  for(long r=0;r<reps;r++){ const float *xp=x; for(int b=0;b<NB;b++){ _Pragma("GCC unroll 5") for(int t=0;t<5;t++){ __m512 xv=_mm512_set1_ps(xp[t]); a[t]=_mm512_fmadd_ps(w0,xv,a[t]); a[5+t]=_mm512_fmadd_ps(w1,xv,a[5+t]); } xp+=5; } }
  for(int i=0;i<10;i++) out[i]=a[i];
}
/* converts only */
__attribute__((noinline)) void loopC(const uint16_t *w, __m512 *out, long reps){
  __m512 a0=_mm512_setzero_ps(),a1=a0;
  for(long r=0;r<reps;r++){ const uint16_t *wp=w; for(int b=0;b<NB;b++){ a0=_mm512_add_ps(a0,_mm512_cvtph_ps(_mm256_loadu_si256((const void*)wp))); a1=_mm512_add_ps(a1,_mm512_cvtph_ps(_mm256_loadu_si256((const void*)(wp+16)))); wp+=32;} }
  out[0]=a0; out[1]=a1;
}

static int getenv_x;
/* as the kernel: per slot (NB steps) zero, sweep, then the part RMW by q = slot & 3; weights streamed from a buffer of S bytes */
__attribute__((noinline)) void loopE(const uint16_t *w, size_t wbytes, const float *x, float *part, long reps){
  size_t nsl = wbytes / (NB*64); long slot=0;
  for(long r=0;r<reps;r++){ const uint16_t *wp=w + (size_t)(slot % nsl)*NB*32; const float *xp=x + (getenv_x ? (size_t)(slot&31)*NB*5 : 0); int q=slot&3; float *partl = part + (getenv_x ? (size_t)((slot>>2)&7)*320 : 0); slot++;
    __m512 a[10]; _Pragma("GCC unroll 10") for(int i=0;i<10;i++) a[i]=_mm512_setzero_ps();
    for(int b=0;b<NB;b++){ _mm_prefetch((const char*)wp+16384,_MM_HINT_T0); __m512 w0=_mm512_cvtph_ps(_mm256_loadu_si256((const void*)wp)), w1=_mm512_cvtph_ps(_mm256_loadu_si256((const void*)(wp+16)));
      _Pragma("GCC unroll 5") for(int t=0;t<5;t++){ __m512 xv=_mm512_set1_ps(xp[t]); a[t]=_mm512_fmadd_ps(w0,xv,a[t]); a[5+t]=_mm512_fmadd_ps(w1,xv,a[5+t]); }
      wp+=32; xp+=5; }
    _Pragma("GCC unroll 10") for(int i=0;i<10;i++){ float *pl=partl+16*i, *sc=part+2560+16*i;
      if(q==0) _mm512_store_ps(pl,a[i]); else if(q==1) _mm512_store_ps(pl,_mm512_add_ps(_mm512_load_ps(pl),a[i]));
      else if(q==2) _mm512_store_ps(sc,a[i]); else _mm512_store_ps(pl,_mm512_add_ps(_mm512_load_ps(pl),_mm512_add_ps(_mm512_load_ps(sc),a[i]))); } }
}
int main(){ getenv_x = getenv("XS")!=0; static uint16_t w[NB*32] __attribute__((aligned(64))); static float wf[NB*32] __attribute__((aligned(64))), x[NB*5*32]; for(int i=0;i<NB*32;i++){w[i]=0x3c00; wf[i]=1;} for(int i=0;i<NB*5*32;i++) x[i]=1e-9f;
  __m512 o[10]; long R=2000000; double fl=2.0*16*10*NB*R;
  for(int k=0;k<2;k++){
  double t=now(); loopR(_mm512_set1_ps(1),_mm512_set1_ps(1),o,R); t=now()-t; printf("regs only      %.1f GFLOP/s\n",fl/t/1e9);
  t=now(); loopB(_mm512_set1_ps(1),_mm512_set1_ps(1),x,o,R); t=now()-t; printf("bcast+fma      %.1f GFLOP/s\n",fl/t/1e9);
  t=now(); loopF(wf,x,o,R); t=now()-t; printf("f32 ld+bc+fma  %.1f GFLOP/s\n",fl/t/1e9);
  t=now(); loopA(w,x,o,R); t=now()-t; printf("f16 cvt+bc+fma %.1f GFLOP/s\n",fl/t/1e9);
  { static float part[3200] __attribute__((aligned(64))); size_t sizes[]={NB*64, 32768, 524288, 4<<20, 64<<20}; for(int z=0;z<5;z++){ uint16_t *big=aligned_alloc(64,sizes[z]); for(size_t i=0;i<sizes[z]/2;i++) big[i]=0x3c00;
    long RR = R/ (z==4?8:1); t=now(); loopE(big,sizes[z],x,part,RR); t=now()-t; printf("kernel-like, weights %zu KB: %.1f GFLOP/s (%.1f GB/s)\n",sizes[z]>>10,2.0*16*10*NB*RR/t/1e9, (double)NB*64*RR/t/1e9); free(big);} }
  t=now(); loopC(w,o,R); t=now()-t; printf("cvt only: %.2f ns per step (2 cvt)\n",t/(NB*(double)R)*1e9);
  }
  return (int)_mm512_reduce_add_ps(o[0]) == 12345;}
