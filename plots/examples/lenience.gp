# speclab plot script: Lenience curve α(l), standard and temperature-0 forms
# made by: speclab plot lenience 'noise 1' -o plots/examples/lenience.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'lenience.png'
set title 'Lenience curve α(l), standard and temperature-0 forms'
set xlabel 'lenience l (1 = exact speculative sampling)'
set ylabel 'α(l) (expected acceptance rate)'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0:1]
set yrange [0:1.05]
set key top right nobox samplen 2 spacing 1.1
data = 'lenience.dat'
plot data index 0 using 1:2 with linespoints lw 1.2 dt 1 pt 7 ps 0.6 lc rgb '#0072B2' title 'standard Σ min(q, p/l)', \
     data index 1 using 1:2 with linespoints lw 1.2 dt 2 pt 5 ps 0.6 lc rgb '#D55E00' title 'temperature-0 form'
unset output
