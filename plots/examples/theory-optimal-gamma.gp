# speclab plot script: Optimal γ (Theorem 3.8); 0 = plain decoding; cut where γ reaches 20
# made by: speclab plot theory-optimal-gamma -o plots/examples/theory-optimal-gamma.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'theory-optimal-gamma.png'
set title 'Optimal γ (Theorem 3.8); 0 = plain decoding; cut where γ reaches 20'
set xlabel 'α (expected acceptance rate)'
set ylabel 'optimal γ (drafts per iteration)'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0:1]
set yrange [0:]
set key top left Left reverse nobox samplen 2 spacing 1.1
data = 'theory-optimal-gamma.dat'
plot data index 0 using 1:2 with steps lw 1.5 dt 1 lc rgb '#0072B2' title 'c = 0.01', \
     data index 1 using 1:2 with steps lw 1.5 dt 1 lc rgb '#D55E00' title 'c = 0.02', \
     data index 2 using 1:2 with steps lw 1.5 dt 1 lc rgb '#009E73' title 'c = 0.05', \
     data index 3 using 1:2 with steps lw 1.5 dt 1 lc rgb '#E69F00' title 'c = 0.1', \
     data index 4 using 1:2 with steps lw 1.5 dt 1 lc rgb '#CC79A7' title 'c = 0.2'
unset output
