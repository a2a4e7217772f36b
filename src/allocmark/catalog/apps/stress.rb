# allocmark's ruby workload: strings, arrays and hashes churned by THREADS
# threads (the seed's STRESS_THREADS). Each thread keeps a window of live
# objects and replaces them, so the heap is both grown and recycled; the total
# work (SCALE units) is split between the threads. Prints one JSON line.
threads = Integer(ARGV.fetch(0, "1"))
scale = Integer(ARGV.fetch(1, "10"))
per_thread = 60_000 * scale / threads
window = 20_000

workers = Array.new(threads) do |t|
  Thread.new do
    live = Array.new(window)
    sum = 0
    per_thread.times do |i|
      s = "k#{t}-#{i}-" * (1 + i % 13)
      h = { s => i, :up => s.upcase, "r#{i % 97}" => s.reverse, :n => [i, t] }
      a = Array.new(i % 40) { |j| "#{j}:#{i}" }
      live[i % window] = [h, a]
      if i % 2000 == 0
        sum += live.compact.sum { |pair| pair[1].size } + a.sort.join(",").size
      end
    end
    sum
  end
end
checksum = workers.sum(&:value)
puts %({"ops": #{per_thread * threads}, "checksum": #{checksum}})
