# speclab plot script: Acceptance per draft position (replay of the logged β)
# made by: speclab plot acceptance-position 'noise 1' -o plots/examples/acceptance-position.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'acceptance-position.png'
set title 'Acceptance per draft position (replay of the logged β)'
set xlabel 'draft position i (1 = first drafted token)'
set ylabel 'acceptance rate (fraction of drafts)'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0.5:12.5]
set yrange [0:1.05]
set key top right nobox samplen 2 spacing 1.1
data = 'acceptance-position.dat'
plot data index 0 using 1:2 with linespoints lw 1.2 dt 1 pt 7 ps 0.6 lc rgb '#0072B2' title 'conditional replay', \
     data index 1 using 1:2 with linespoints lw 1.2 dt 2 pt 5 ps 0.6 lc rgb '#D55E00' title 'unconditional replay'
unset output
