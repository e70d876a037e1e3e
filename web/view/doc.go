// Package view holds the view models of sampviz's pages: the data each
// page and the websocket show (page data, a judgement's status, row
// summaries and summary), the ECharts options of every chart, and the words
// and numbers the templ components print (formatting, the speculative
// trace, the n-gram spans, the teaching texts). web renders them; web/live
// keeps a judgement's view models up to date as its rows arrive.
//
// It never speaks HTTP, never reads or writes files, and never judges
// anything: it only puts what the judging session found into the terms a
// page shows. Its numbers are finite by the time they are marshalled.
package view
